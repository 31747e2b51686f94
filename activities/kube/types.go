package kube
