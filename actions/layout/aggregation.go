package layout

import (
	"path"
)

// The front-proxy (aggregation) CA, the API server's client certificate
// for extension API servers, and the controllers' admin kubeconfig.
const (
	// FileAggregationCA is the API server's --requestheader-client-ca-file.
	FileAggregationCA = "aggregation-ca"
	// FileAggregationCert and FileAggregationKey are its
	// --proxy-client-cert-file and --proxy-client-key-file.
	FileAggregationCert = "aggregation-client-cert"
	FileAggregationKey  = "aggregation-client-key"
	// FileAdminKC is the cluster-admin kubeconfig a controller keeps
	// (Typhoon: admin.conf beside the PKI, which bootstrap.service's
	// kubectl uses; Kedge: /etc/kubernetes/admin.conf; no process flag
	// names it).
	FileAdminKC = "admin-kubeconfig"
)

// readAdminKubeconfig finds a controller's admin.conf: Typhoon's in the
// directory of the cluster CA the API server names, where Typhoon's
// layout script moves auth/admin.conf; Kedge's beside the controller
// manager's kubeconfig, where bootstrap writes both.
func readAdminKubeconfig(l *Layout, r Reader) error {
	var beside string
	switch l.Kind {
	case KindTyphoonFlatcar, KindTyphoonFCOS:
		beside = l.Files[FileClusterCA]
	case KindKedge:
		beside = l.Files[FileControllerManagerKC]
	}
	if beside == "" {
		return nil
	}
	p := path.Join(path.Dir(beside), "admin.conf")
	if _, err := r.ReadFile(p); err != nil {
		if isNotExist(err) {
			return nil
		}
		return err
	}
	l.Files[FileAdminKC] = p
	return nil
}
