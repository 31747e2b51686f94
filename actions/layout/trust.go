package layout

import "slices"

// The CAs a cluster's components trust, as a CA rotation names them.
const (
	CACluster    = "cluster"     // the cluster CA: API clients, kubelets, the CSR signer
	CAEtcd       = "etcd"        // etcd's CA: its servers, peers and clients
	CAFrontProxy = "front-proxy" // the front-proxy (aggregation) CA
)

// TrustPoint is one place on a host that says which certificates of a CA
// its components accept: a CA file, or a kubeconfig's
// certificate-authority data.
type TrustPoint struct {
	Path string `json:"path"`
	// Kubeconfig: the CA is the kubeconfig's certificate-authority-data.
	Kubeconfig bool `json:"kubeconfig,omitempty"`
	// Readers are the components that read it, in a fixed order.
	Readers []string `json:"readers"`
	// Signer: the file is also the controller manager's CSR signer
	// certificate, which must hold exactly one certificate (the signer
	// refuses more), so it can never hold a bundle of two CAs.
	Signer bool `json:"signer,omitempty"`
}

// trustFiles are the files of Files that hold a CA, per CA, with who
// reads them.
var trustFiles = map[string][]struct{ file, reader string }{
	CACluster: {
		{FileClusterCA, "kube-apiserver"},
		{FileControllerManagerCA, "kube-controller-manager"},
		{FileRootCA, "kube-controller-manager"},
		{FileKubeletClientCA, "kubelet"},
	},
	CAEtcd: {
		{FileEtcdServerCA, "etcd"},
		{FileEtcdPeerCA, "etcd"},
		{FileEtcdClientCA, "kube-apiserver"},
	},
	CAFrontProxy: {
		{FileAggregationCA, "kube-apiserver"},
	},
}

// trustKubeconfigs are the kubeconfigs whose CA data is the cluster CA.
var trustKubeconfigs = []struct{ file, reader string }{
	{FileControllerManagerKC, "kube-controller-manager"},
	{FileSchedulerKC, "kube-scheduler"},
	{FileAdminKC, "kubectl"},
	{FileKubeletKubecfg, "kubelet"},
	{FileBootstrapKubecfg, "kubelet"},
}

// TrustPoints lists where the host says which certificates of ca its
// components accept, one entry per path: a file several flags name (on
// Typhoon the API server's and the controller manager's client CA, the
// root CA and the signer are one ca.crt) is one point with every reader.
// The kubelet's clientCAFile is listed although, on Typhoon, its unit
// writes it afresh at each start from the bootstrap kubeconfig's CA data,
// which is listed too.
func (l Layout) TrustPoints(ca string) []TrustPoint {
	var out []TrustPoint
	add := func(path, reader string, kubeconfig bool) {
		if path == "" {
			return
		}
		i := slices.IndexFunc(out, func(p TrustPoint) bool { return p.Path == path })
		if i < 0 {
			out = append(out, TrustPoint{Path: path, Kubeconfig: kubeconfig})
			i = len(out) - 1
		}
		if !slices.Contains(out[i].Readers, reader) {
			out[i].Readers = append(out[i].Readers, reader)
		}
	}
	for _, f := range trustFiles[ca] {
		add(l.Files[f.file], f.reader, false)
	}
	if ca == CACluster {
		for _, f := range trustKubeconfigs {
			add(l.Files[f.file], f.reader, true)
		}
	}
	for i := range out {
		out[i].Signer = !out[i].Kubeconfig && out[i].Path == l.Files[FileClusterSigner]
	}
	return out
}
