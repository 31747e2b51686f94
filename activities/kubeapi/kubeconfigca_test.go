package kubeapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"kedge.dev/kedge/actions/kube"

	"kedge.dev/kedge/actions/target"
)

// The worker's kubeconfig through a CA rotation: its CA data becomes the
// bundle, then its credential the new one; each result carries the file
// as it was (the undo saves it back) and who the credential is; a
// kubeconfig naming a CA file is refused and left as it was.
func TestUpdateKubeconfig(t *testing.T) {
	srv := newAPIServer(t)
	cert, key := clientPair(t)
	newCert, newKey := clientPair(t)
	bundle := srv.caPEM() + strings.TrimSpace(newCert) + "\n"
	c := target.Kube{Name: "mercury", Kubeconfig: workerSecret(t, t.TempDir(), "admin.conf",
		kubeconfigWith(srv.URL, "    certificate-authority-data: "+b64(srv.caPEM())+"\n    tls-server-name: example.com", "    client-certificate-data: "+b64(cert)+"\n    client-key-data: "+b64(key)))}
	orig, _ := os.ReadFile(c.Kubeconfig)
	a, _ := refusedActs()

	res, err := a.UpdateKubeconfig(t.Context(), kube.UpdateKubeconfigInput{Cluster: c, CA: bundle})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || res.Previous != string(orig) || res.CommonName != "kedge-admin" || len(res.Organization) != 1 || res.Organization[0] != "system:masters" {
		t.Errorf("trust: %+v", res)
	}
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(cfg.Clusters["c"].CertificateAuthorityData); got != bundle {
		t.Errorf("CA data:\n%s\nwant\n%s", got, bundle)
	}
	if got := string(cfg.AuthInfos["u"].ClientCertificateData); got != cert {
		t.Error("the credential changed with the CA")
	}
	// Still a kubeconfig the worker loads, and reaches the server with.
	if _, err := a.GetNode(t.Context(), kube.NodeInput{Cluster: c, Node: "w1"}); err != nil {
		t.Errorf("get-node with the updated kubeconfig: %v", err)
	}
	if again, err := a.UpdateKubeconfig(t.Context(), kube.UpdateKubeconfigInput{Cluster: c, CA: bundle}); err != nil || again.Changed {
		t.Errorf("the same CA again: %+v %v", again, err)
	}

	res, err = a.UpdateKubeconfig(t.Context(), kube.UpdateKubeconfigInput{Cluster: c, Certificate: newCert, PrivateKey: newKey})
	if err != nil || !res.Changed {
		t.Fatalf("reissue: %+v %v", res, err)
	}
	if cfg, err = clientcmd.LoadFromFile(c.Kubeconfig); err != nil || string(cfg.AuthInfos["u"].ClientCertificateData) != newCert || string(cfg.AuthInfos["u"].ClientKeyData) != newKey {
		t.Errorf("the new credential is not in the kubeconfig (%v)", err)
	}
	if fi, err := os.Stat(c.Kubeconfig); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after the update: %v %v", fi.Mode(), err)
	}

	// The undo puts the file back as it was.
	if _, err := a.UpdateKubeconfig(t.Context(), kube.UpdateKubeconfigInput{Cluster: c, Restore: string(orig)}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if b, _ := os.ReadFile(c.Kubeconfig); string(b) != string(orig) {
		t.Error("restore did not put the file back")
	}
	// A key holder's "restore" that sends the worker's credential to
	// their server is refused, and the file stays.
	evil := strings.Replace(string(orig), srv.URL, "https://attacker.example:6443", 1)
	_, err = a.UpdateKubeconfig(t.Context(), kube.UpdateKubeconfigInput{Cluster: c, Restore: evil})
	refused(t, "a restore naming another server", err, "differs from")
	if b, _ := os.ReadFile(c.Kubeconfig); string(b) != string(orig) {
		t.Error("the refused restore changed the file")
	}

	// A CA in a file of its own is not changed behind its owner's back.
	ref := filepath.Join(filepath.Dir(c.Kubeconfig), "ref.conf")
	content := kubeconfigWith(srv.URL, "    certificate-authority: ca.crt", "    client-certificate-data: "+b64(cert)+"\n    client-key-data: "+b64(key))
	if err := os.WriteFile(ref, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = a.UpdateKubeconfig(t.Context(), kube.UpdateKubeconfigInput{Cluster: target.Kube{Name: "mercury", Kubeconfig: ref}, CA: bundle})
	if err == nil || !strings.Contains(err.Error(), "clusters[c] names a CA file (ca.crt)") {
		t.Errorf("a CA file reference: %v", err)
	}
	if b, _ := os.ReadFile(ref); string(b) != content {
		t.Error("the refused kubeconfig was changed")
	}
	if _, err := a.UpdateKubeconfig(t.Context(), kube.UpdateKubeconfigInput{Cluster: c, CA: "not a certificate"}); err == nil {
		t.Error("a CA that is no certificate was accepted")
	}
}
