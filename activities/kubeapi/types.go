package kubeapi
