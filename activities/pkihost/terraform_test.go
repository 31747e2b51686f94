package pkihost

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/target"
	"kedge.dev/kedge/activities/sshhost"
	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/integration/sshtest"

	"kedge.dev/kedge/actions/pki"
)

// recordedSecrets keeps what pki.export-terraform writes.
type recordedSecrets struct{ writes map[string]map[string]any }

func (r *recordedSecrets) Put(_ context.Context, _ target.Vault, path string, data map[string]any) (int, error) {
	if r.writes == nil {
		r.writes = map[string]map[string]any{}
	}
	r.writes[path] = data
	return len(r.writes), nil
}

// unpack is Typhoon's /opt/bootstrap/layout's awk: a line "##### NAME"
// starts file NAME, every other line goes to the file being written.
func unpack(bundle string) map[string]string {
	out := map[string]string{}
	name := ""
	for _, line := range strings.SplitAfter(bundle, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.Contains(line, "#####") {
			name = f[1]
			continue
		}
		out[name] += strings.TrimSuffix(line, "\n") + "\n"
	}
	return out
}

// rotatedTyphoon lays out a Typhoon controller's files under a root as
// Typhoon's layout script leaves them, every certificate from ca (etcd's
// from etcdCA), and returns the activities reading them.
func rotatedTyphoon(t *testing.T, ca, etcdCA testCA) (*Activities, target.SSH, string, *recordedSecrets) {
	t.Helper()
	root := t.TempDir()
	end := time.Now().Add(24 * time.Hour)
	agg := newTestCA(t, "aggregation-ca", end)
	files := map[string]string{}
	pair := func(name string, from testCA) {
		c, k := from.leaf(t, filepath.Base(name), end)
		files[typhoonAssetFiles[name+".crt"]+typhoonAggregationFiles[name+".crt"]] = c
		files[typhoonAssetFiles[name+".key"]+typhoonAggregationFiles[name+".key"]] = k
	}
	pair("tls/k8s/apiserver", ca)
	pair("tls/etcd/server", etcdCA)
	pair("tls/etcd/peer", etcdCA)
	pair("tls/etcd/etcd-client", etcdCA)
	pair("tls/k8s/aggregation-client", agg)
	files["/etc/kubernetes/pki/ca.crt"] = ca.pem
	files["/etc/kubernetes/pki/ca.key"] = pemKey(t, ca.key)
	files["/etc/kubernetes/pki/aggregation-ca.crt"] = agg.pem
	for _, p := range []string{"/etc/ssl/etcd/etcd/server-ca.crt", "/etc/ssl/etcd/etcd/peer-ca.crt", "/etc/kubernetes/pki/etcd-client-ca.crt"} {
		files[p] = etcdCA.pem
	}
	pub, priv := pemPub(t)
	files["/etc/kubernetes/pki/service-account.pub"], files["/etc/kubernetes/pki/service-account.key"] = pub, priv
	for _, who := range []string{"admin", "controller-manager", "scheduler"} {
		c, k := ca.leaf(t, who, end)
		files["/etc/kubernetes/pki/"+who+".conf"] = kubeconfigDoc(ca.pem, "    client-certificate-data: "+base64.StdEncoding.EncodeToString([]byte(c))+
			"\n    client-key-data: "+base64.StdEncoding.EncodeToString([]byte(k))+"\n")
	}
	files[typhoonBootstrapKubeconfig] = kubeconfigDoc(ca.pem, "    token: 0a1b2c.0123456789abcdef\n")
	files["/etc/kubernetes/manifests/kube-apiserver.yaml"] = "kind: Pod\n"
	files["/opt/bootstrap/assets/manifests/bootstrap-token.yaml"] = "kind: Secret\n"
	files["/opt/bootstrap/assets/manifests/network/cilium.yaml"] = "kind: DaemonSet\n"
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(root+p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(root+p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv := sshtest.Start(t, sshtest.Config{})
	pool := sshpool.New(sshpool.Options{})
	t.Cleanup(func() { pool.Close() })
	hosts := &sshhost.Activities{Pool: pool}
	secrets := &recordedSecrets{}
	a := &Activities{Hosts: hosts, Lister: hosts, Secrets: secrets, root: root}
	tg := target.SSH{Node: "tyc1", Address: srv.Host, Port: srv.Port, IdentityFile: srv.IdentityFile, KnownHostsFile: srv.KnownHostsFile}
	return a, tg, root, secrets
}

// After a rotation, the export holds Typhoon's assets_dist names and the
// controller's files under them, in the one-file form Typhoon's layout
// script unpacks; the kubelets' and the admin kubeconfig; and the result
// names them, with no content.
func TestExportTerraformKeepsWhatTyphoonsTerraformHandsOut(t *testing.T) {
	end := time.Now().Add(48 * time.Hour)
	ca, etcdCA := newTestCA(t, "kubernetes-ca 2027", end), newTestCA(t, "etcd-ca 2027", end)
	a, tg, root, secrets := rotatedTyphoon(t, ca, etcdCA)
	const path = "kedge/clusters/mercury/terraform"
	res, err := a.ExportTerraform(t.Context(), pki.ExportTerraformInput{Target: tg, Kind: "typhoon-flatcar", CA: ca.pem, Path: path})
	if err != nil {
		t.Fatal(err)
	}
	got := secrets.writes[path]
	if got == nil || res.Path != path || res.TokenID != "0a1b2c" || strings.Join(res.Fields, ",") != "assets,kubeconfig-admin,kubeconfig-kubelet" {
		t.Fatalf("result %+v, written %v", res, got != nil)
	}
	read := func(p string) string { return string(must(os.ReadFile(root + p))) }
	if got["kubeconfig-kubelet"] != read(typhoonBootstrapKubeconfig) || got["kubeconfig-admin"] != read("/etc/kubernetes/pki/admin.conf") {
		t.Error("the kubeconfigs are not the controller's")
	}
	bundle := unpack(got["assets"].(string))
	want := []string{"auth/admin.conf", "manifests/bootstrap-token.yaml", "manifests/network/cilium.yaml", "static-manifests/kube-apiserver.yaml",
		"tls/etcd/peer.key", "tls/k8s/aggregation-client.crt", "tls/k8s/ca.key", "tls/k8s/service-account.key"}
	for _, name := range want {
		if !strings.Contains(strings.Join(res.Assets, " "), name) {
			t.Errorf("assets %v lack %s", res.Assets, name)
		}
	}
	if len(bundle) != len(res.Assets) {
		t.Errorf("the bundle unpacks to %d files, the result names %d", len(bundle), len(res.Assets))
	}
	for name, p := range map[string]string{"tls/k8s/ca.crt": "/etc/kubernetes/pki/ca.crt", "tls/etcd/peer.key": "/etc/ssl/etcd/etcd/peer.key",
		"manifests/network/cilium.yaml": "/opt/bootstrap/assets/manifests/network/cilium.yaml"} {
		// Typhoon's own bundle gives each file one more newline (ssh.tf
		// joins the entries with one): so does this one.
		if strings.TrimRight(bundle[name], "\n") != strings.TrimRight(read(p), "\n") {
			t.Errorf("the bundle's %s is not %s", name, p)
		}
	}
	if strings.Contains(strings.Join(res.Assets, ""), "PRIVATE") {
		t.Error("the result holds content")
	}
}

// Nothing is kept while a file still trusts or holds the old CA, or a
// certificate is not its CA's: an export Terraform would hand out broken.
func TestExportTerraformRefusesWhatIsNotRotatedWhole(t *testing.T) {
	end := time.Now().Add(48 * time.Hour)
	ca, etcdCA, old := newTestCA(t, "kubernetes-ca 2027", end), newTestCA(t, "etcd-ca 2027", end), newTestCA(t, "kubernetes-ca", end)
	for name, change := range map[string]func(root string){
		"ca.crt still a bundle": func(root string) {
			writeFile(t, root+"/etc/kubernetes/pki/ca.crt", ca.pem+old.pem)
		},
		"the kubelets' kubeconfig trusts the old CA": func(root string) {
			writeFile(t, root+typhoonBootstrapKubeconfig, kubeconfigDoc(old.pem, "    token: 0a1b2c.0123456789abcdef\n"))
		},
		"the API server's certificate from the old CA": func(root string) {
			c, k := old.leaf(t, "kube-apiserver", end)
			writeFile(t, root+"/etc/kubernetes/pki/apiserver.crt", c)
			writeFile(t, root+"/etc/kubernetes/pki/apiserver.key", k)
		},
		"a key that is not its certificate's": func(root string) {
			_, k := etcdCA.leaf(t, "other", end)
			writeFile(t, root+"/etc/ssl/etcd/etcd/peer.key", k)
		},
		"no bootstrap token": func(root string) {
			writeFile(t, root+typhoonBootstrapKubeconfig, kubeconfigDoc(ca.pem, "    token: \"\"\n"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			a, tg, root, secrets := rotatedTyphoon(t, ca, etcdCA)
			change(root)
			_, err := a.ExportTerraform(t.Context(), pki.ExportTerraformInput{Target: tg, Kind: "typhoon-fcos", CA: ca.pem, Path: "kedge/clusters/mercury/terraform"})
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), "tyc1's files are not a rotated whole") {
				t.Errorf("err = %v, want a refusal", err)
			}
			if len(secrets.writes) != 0 {
				t.Error("something was written")
			}
		})
	}
	a, tg, _, _ := rotatedTyphoon(t, ca, etcdCA)
	if _, err := a.ExportTerraform(t.Context(), pki.ExportTerraformInput{Target: tg, Kind: "kedge", CA: ca.pem, Path: "kedge/clusters/mercury/terraform"}); err == nil {
		t.Error("Kedge's layout exported as Typhoon's")
	}
	if _, err := a.ExportTerraform(t.Context(), pki.ExportTerraformInput{Target: tg, Kind: "typhoon-fcos", CA: ca.pem, Path: "kedge/clusters/../../sys/x"}); err == nil {
		t.Error("a path out of kedge/clusters/ was taken")
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
