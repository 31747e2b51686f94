package nodefiles

import (
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// etcd trusts etcd's CA alone, for clients and for peers, and cannot even
// see the cluster CA: a kubelet's certificate (the cluster CA signs those,
// also for anyone who joins with a bootstrap token) does not open etcd.
// The API server reaches etcd with its etcd-client certificate and checks
// etcd's server certificate against etcd's CA.
func TestEtcdTrustsItsOwnCAOnly(t *testing.T) {
	files, err := StaticPods(controlPlane())
	if err != nil {
		t.Fatal(err)
	}
	pod := func(name string) corev1.Container {
		var p corev1.Pod
		if err := yaml.UnmarshalStrict(files[name], &p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, m := range p.Spec.Containers[0].VolumeMounts {
			if name == "etcd.yaml" && m.MountPath != EtcdDataDir && m.MountPath != EtcdPKIDir {
				t.Errorf("etcd mounts %s: it sees nothing of the cluster's PKI but etcd's", m.MountPath)
			}
		}
		return p.Spec.Containers[0]
	}
	flags := func(c corev1.Container) map[string]string {
		out := map[string]string{}
		for _, a := range c.Command[1:] {
			k, v, _ := strings.Cut(a, "=")
			out[k] = v
		}
		return out
	}
	etcdCA := path.Join(EtcdPKIDir, "ca.crt")
	etcd := flags(pod("etcd.yaml"))
	for _, f := range []string{"--trusted-ca-file", "--peer-trusted-ca-file"} {
		if etcd[f] != etcdCA {
			t.Errorf("etcd %s=%q, want etcd's CA %s", f, etcd[f], etcdCA)
		}
	}
	for _, f := range []string{"--client-cert-auth", "--peer-client-cert-auth"} {
		if etcd[f] != "true" {
			t.Errorf("etcd %s=%q, want true", f, etcd[f])
		}
	}
	api := flags(pod("kube-apiserver.yaml"))
	for f, want := range map[string]string{
		"--etcd-cafile":    etcdCA,
		"--etcd-certfile":  path.Join(PKIDir, "apiserver-etcd-client.crt"),
		"--etcd-keyfile":   path.Join(PKIDir, "apiserver-etcd-client.key"),
		"--client-ca-file": path.Join(PKIDir, "ca.crt"),
	} {
		if api[f] != want {
			t.Errorf("kube-apiserver %s=%q, want %s", f, api[f], want)
		}
	}
}
