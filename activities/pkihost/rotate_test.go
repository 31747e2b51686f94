package pkihost

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kedge.dev/kedge/actions/pki"
	"kedge.dev/kedge/activities/sshhost"

	"kedge.dev/kedge/actions/layout"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/target"
)

// localLinks resolves links as OpenSSH's sftp-server does (the test's
// SFTP server only cleans the path): the files are local.
type localLinks struct{ *sshhost.Activities }

func (l localLinks) RealPath(_ context.Context, _ target.SSH, p string) (string, error) {
	return filepath.EvalSymlinks(p)
}

// rotationHost is a Typhoon controller with a kubelet, for pki.rotate-ca.
type rotationHost struct {
	*typhoonController
	next, etcdNext         testCA
	nextKey                string
	saOld, saNew, saNewKey string
	manifest               string
}

const kcmManifest = `apiVersion: v1
kind: Pod
metadata:
  name: kube-controller-manager
spec:
  containers:
  - name: kube-controller-manager
    command:
    - kube-controller-manager
    - --client-ca-file=/etc/kubernetes/pki/ca.crt
    - --cluster-signing-cert-file=%[1]s/ca.crt
    - --cluster-signing-key-file=%[1]s/ca.key
    - --root-ca-file=%[1]s/ca.crt
`

func kubeconfigDoc(ca, user string) string {
	return "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://api.example:6443\n    certificate-authority-data: " +
		base64.StdEncoding.EncodeToString([]byte(ca)) + "\nusers:\n- name: u\n  user:\n" + user + "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
}

func pemKey(t *testing.T, k *ecdsa.PrivateKey) string {
	t.Helper()
	d, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: d}))
}

func pemPub(t *testing.T) (pub, priv string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	d, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: d})), pemKey(t, k)
}

func newRotationHost(t *testing.T) *rotationHost {
	t.Helper()
	end := time.Now().Add(8760 * time.Hour).Truncate(time.Second)
	c := newTyphoonController(t, end, end.Add(-time.Hour))
	h := &rotationHost{typhoonController: c, next: newTestCA(t, "kubernetes-ca-2", end.Add(87600*time.Hour)), etcdNext: newTestCA(t, "etcd-ca-2", end.Add(87600*time.Hour))}
	h.nextKey = pemKey(t, h.next.key)
	c.vault.cas["cluster-next"], c.vault.cas["etcd-next"] = h.next, h.etcdNext
	pkiDir := filepath.Join(c.root, "etc/kubernetes/pki")
	kubelet := filepath.Join(c.root, "var/lib/kubelet")
	manifests := filepath.Join(c.root, "etc/kubernetes/manifests")
	for _, d := range []string{manifests, filepath.Join(kubelet, "pki")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.manifest = filepath.Join(manifests, "kube-controller-manager.yaml")
	cmCert, cmKey := c.ca.leaf(t, "system:kube-controller-manager", end.Add(-time.Hour))
	kubeletCert, kubeletKey := c.ca.leaf(t, "system:node:tyc1", end.Add(-time.Hour))
	servingCert, servingKey := c.ca.leaf(t, "system:node:tyc1", end.Add(-time.Hour))
	h.saOld, _ = pemPub(t)
	h.saNew, h.saNewKey = pemPub(t)
	embedded := "    client-certificate-data: " + base64.StdEncoding.EncodeToString([]byte(cmCert)) + "\n    client-key-data: " + base64.StdEncoding.EncodeToString([]byte(cmKey)) + "\n"
	files := map[string]string{
		layout.FileClusterCA:           filepath.Join(pkiDir, "ca.crt"),
		layout.FileClusterCAKey:        filepath.Join(pkiDir, "ca.key"),
		layout.FileClusterSigner:       filepath.Join(pkiDir, "ca.crt"),
		layout.FileRootCA:              filepath.Join(pkiDir, "ca.crt"),
		layout.FileControllerManagerCA: filepath.Join(pkiDir, "ca.crt"),
		layout.FileEtcdServerCA:        filepath.Join(c.root, "etc/ssl/etcd/etcd/server-ca.crt"),
		layout.FileServiceAccountP:     filepath.Join(pkiDir, "service-account.pub"),
		layout.FileServiceAccountK:     filepath.Join(pkiDir, "service-account.key"),
		layout.FileControllerManagerKC: filepath.Join(c.root, "etc/kubernetes/controller-manager.conf"),
		layout.FileKubeletKubecfg:      filepath.Join(kubelet, "kubeconfig"),
		layout.FileBootstrapKubecfg:    filepath.Join(c.root, "etc/kubernetes/kubeconfig"),
	}
	for p, content := range map[string]string{
		files[layout.FileClusterCA]:                                 c.ca.pem,
		files[layout.FileClusterCAKey]:                              pemKey(t, c.ca.key),
		files[layout.FileServiceAccountP]:                           h.saOld,
		files[layout.FileServiceAccountK]:                           "old sa key\n",
		files[layout.FileControllerManagerKC]:                       kubeconfigDoc(c.ca.pem, embedded),
		files[layout.FileKubeletKubecfg]:                            kubeconfigDoc(c.ca.pem, "    client-certificate: "+filepath.Join(kubelet, "pki/kubelet-client-current.pem")+"\n    client-key: "+filepath.Join(kubelet, "pki/kubelet-client-current.pem")+"\n"),
		files[layout.FileBootstrapKubecfg]:                          kubeconfigDoc(c.ca.pem, "    token: abcdef.0123456789abcdef\n"),
		filepath.Join(kubelet, "pki/kubelet-client-2026-01-01.pem"): kubeletCert + kubeletKey,
		filepath.Join(kubelet, "pki/kubelet.crt"):                   servingCert,
		filepath.Join(kubelet, "pki/kubelet.key"):                   servingKey,
		h.manifest: fmt.Sprintf(kcmManifest, pkiDir),
	} {
		writeOwned(t, p, content, 0o644, 0, 0)
	}
	writeOwned(t, files[layout.FileClusterCAKey], pemKey(t, c.ca.key), 0o600, 0, 0)
	writeOwned(t, filepath.Join(kubelet, "pki/kubelet.key"), servingKey, 0o600, 0, 0)
	// As the kubelet's certificate store keeps it: a link to a dated file.
	if err := os.Symlink("kubelet-client-2026-01-01.pem", filepath.Join(kubelet, "pki/kubelet-client-current.pem")); err != nil {
		t.Fatal(err)
	}
	c.acts.Hosts = localLinks{c.acts.Hosts.(*sshhost.Activities)}
	c.acts.RotationDir = filepath.Join(t.TempDir(), "rotation")
	if err := os.Chmod(filepath.Dir(files[layout.FileEtcdServerCA]), 0o700); err != nil {
		t.Fatal(err)
	}
	writeOwned(t, files[layout.FileEtcdServerCA], c.etcdCA.pem, 0o500, 232, 232)
	if err := os.Chmod(filepath.Dir(files[layout.FileEtcdServerCA]), 0o500); err != nil {
		t.Fatal(err)
	}
	for k, v := range files {
		c.files[k] = v
	}
	return h
}

func (h *rotationHost) rotate(t *testing.T, stage, scope string, kc pki.KubeletClient) pki.RotateCAResult {
	t.Helper()
	res, err := h.acts.RotateCA(t.Context(), pki.RotateCAInput{Target: h.target, Vault: target.Vault{Address: h.vaultURL}, Stage: stage, Scope: scope,
		Files: h.files, StaticPods: map[string]string{"kube-controller-manager": h.manifest}, Kind: layout.KindTyphoonFlatcar,
		ClusterCA:      pki.CARotation{Old: h.ca.pem, New: h.next.pem, Issuer: "cluster-next", Key: h.nextKey},
		EtcdCA:         pki.CARotation{Old: h.etcdCA.pem, New: h.etcdNext.pem, Issuer: "etcd-next"},
		ServiceAccount: pki.KeyRotation{OldPublic: h.saOld, NewPublic: h.saNew, NewPrivate: h.saNewKey},
		KubeletClient:  kc})
	if err != nil {
		t.Fatalf("%s %s: %v", stage, scope, err)
	}
	return res
}

func (h *rotationHost) certs(t *testing.T, p string) []string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, raw := range pemBlocks(b, "CERTIFICATE") {
		c, err := x509.ParseCertificate(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c.Subject.CommonName)
	}
	return out
}

func (h *rotationHost) kubeconfigCAs(t *testing.T, p string) []string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), "certificate-authority-data: ")
	line, _, _ := strings.Cut(string(b[i+len("certificate-authority-data: "):]), "\n")
	data, err := base64.StdEncoding.DecodeString(line)
	if err != nil {
		t.Fatalf("%s: the CA data is not one base64 line: %v", p, err)
	}
	f := filepath.Join(t.TempDir(), "ca")
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return h.certs(t, f)
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A controller with its kubelet through the three stages: trust gives the
// signer files of its own (one certificate: the CSR signer refuses two)
// and every trust point both CAs; reissue makes the signer and every
// leaf the new CA's and the new service-account key sign; drop leaves
// the new CA alone and the signer back on ca.crt and ca.key. A stage run
// again changes nothing, and host.restore-bundle puts a stage back.
func TestRotateCAStages(t *testing.T) {
	h := newRotationHost(t)
	f := h.files
	pkiDir := filepath.Dir(f[layout.FileClusterCA])
	signer, signerKeyFile := filepath.Join(pkiDir, "ca-signer.crt"), filepath.Join(pkiDir, "ca-signer.key")
	origKey := read(t, f[layout.FileClusterCAKey])
	before := map[string]string{}
	for _, p := range []string{f[layout.FileClusterCA], h.manifest, f[layout.FileControllerManagerKC], f[layout.FileServiceAccountP], f[layout.FileEtcdServerCA]} {
		before[p] = read(t, p)
	}

	res := h.rotate(t, pki.StageTrust, pki.ScopeControlPlane, pki.KubeletClient{})
	both := []string{"kubernetes-ca", "kubernetes-ca-2"}
	if got := h.certs(t, f[layout.FileClusterCA]); !slices.Equal(got, both) {
		t.Errorf("ca.crt after trust: %v", got)
	}
	if got := h.certs(t, signer); !slices.Equal(got, []string{"kubernetes-ca"}) || read(t, signerKeyFile) != origKey {
		t.Errorf("the signer's own files: %v", got)
	}
	if uid, _, mode := ownerAndMode(t, signerKeyFile); uid != 0 || mode != 0o600 {
		t.Errorf("ca-signer.key: uid %d mode %o, want ca.key's 0 600", uid, mode)
	}
	m := read(t, h.manifest)
	if !strings.Contains(m, "- --cluster-signing-cert-file="+signer+" # kedge ca-rotation: was "+f[layout.FileClusterCA]+"\n") ||
		!strings.Contains(m, "- --root-ca-file="+f[layout.FileClusterCA]+"\n") {
		t.Errorf("manifest after trust:\n%s", m)
	}
	if got := h.kubeconfigCAs(t, f[layout.FileControllerManagerKC]); !slices.Equal(got, both) {
		t.Errorf("controller-manager.conf CA data: %v", got)
	}
	if got := h.kubeconfigCAs(t, f[layout.FileKubeletKubecfg]); !slices.Equal(got, []string{"kubernetes-ca"}) {
		t.Errorf("the control plane's step changed the kubelet's kubeconfig: %v", got)
	}
	if got := h.certs(t, f[layout.FileEtcdServerCA]); !slices.Equal(got, []string{"etcd-ca", "etcd-ca-2"}) {
		t.Errorf("etcd's server-ca.crt: %v", got)
	}
	if uid, _, mode := ownerAndMode(t, f[layout.FileEtcdServerCA]); uid != 232 || mode != 0o500 {
		t.Errorf("server-ca.crt: uid %d mode %o, want 232 500", uid, mode)
	}
	if !samePEM([]byte(read(t, f[layout.FileServiceAccountP])), [][]byte{[]byte(h.saOld), []byte(h.saNew)}) {
		t.Errorf("service-account.pub after trust:\n%s", read(t, f[layout.FileServiceAccountP]))
	}
	if !slices.Equal(res.Restart, []string{"etcd", "kube-apiserver", "kube-controller-manager"}) {
		t.Errorf("restart after trust: %v", res.Restart)
	}
	if len(res.Reissued) != 0 {
		t.Errorf("trust reissued %v", res.Reissued)
	}

	// The host.layout of a split controller: the signer is ca-signer.*.
	split := func() {
		f[layout.FileClusterSigner], f[layout.FileClusterCAKey] = signer, signerKeyFile
	}
	split()
	if again := h.rotate(t, pki.StageTrust, pki.ScopeControlPlane, pki.KubeletClient{}); len(again.Files) != 0 || len(again.Restart) != 0 {
		t.Errorf("trust again: %+v", again)
	}

	// Undo of trust: everything as it was.
	hosts := h.acts.Hosts.(localLinks)
	changed := true
	if _, err := hosts.RestoreBundle(t.Context(), host.RestoreBundleInput{Target: h.target, Files: res.Files, Backup: res.Backup, Created: res.Created, Changed: &changed}); err != nil {
		t.Fatal(err)
	}
	for p, want := range before {
		if read(t, p) != want {
			t.Errorf("%s not restored by the undo of trust", p)
		}
	}
	if _, err := os.Stat(signer); !os.IsNotExist(err) {
		t.Errorf("ca-signer.crt left by the undo: %v", err)
	}
	f[layout.FileClusterSigner], f[layout.FileClusterCAKey] = f[layout.FileClusterCA], filepath.Join(pkiDir, "ca.key")
	h.rotate(t, pki.StageTrust, pki.ScopeControlPlane, pki.KubeletClient{})
	split()
	kres := h.rotate(t, pki.StageTrust, pki.ScopeKubelet, pki.KubeletClient{})
	for _, k := range []string{layout.FileKubeletKubecfg, layout.FileBootstrapKubecfg} {
		if got := h.kubeconfigCAs(t, f[k]); !slices.Equal(got, both) {
			t.Errorf("%s CA data after the kubelet's trust: %v", k, got)
		}
	}
	if !slices.Equal(kres.Restart, []string{"kubelet"}) {
		t.Errorf("kubelet restart: %v", kres.Restart)
	}

	// Reissue.
	res = h.rotate(t, pki.StageReissue, pki.ScopeControlPlane, pki.KubeletClient{})
	if got := h.certs(t, signer); !slices.Equal(got, []string{"kubernetes-ca-2"}) || read(t, signerKeyFile) != h.nextKey {
		t.Errorf("signer after reissue: %v", got)
	}
	if got := h.certs(t, f[layout.FileClusterCA]); !slices.Equal(got, both) {
		t.Errorf("ca.crt after reissue: %v", got)
	}
	for _, p := range []string{f[layout.FileAPIServerCert], f[layout.FileEtcdServerCert]} {
		leaf, _ := firstCert([]byte(read(t, p)))
		if leaf.CheckSignatureFrom(h.next.cert) != nil && leaf.CheckSignatureFrom(h.etcdNext.cert) != nil {
			t.Errorf("%s is from %q after reissue", p, leaf.Issuer.CommonName)
		}
	}
	cm, err := embeddedCert([]byte(read(t, f[layout.FileControllerManagerKC])))
	if err != nil || cm.CheckSignatureFrom(h.next.cert) != nil || cm.Subject.CommonName != "system:kube-controller-manager" {
		t.Errorf("controller-manager.conf's credential after reissue: %v %v", cm, err)
	}
	if got := h.kubeconfigCAs(t, f[layout.FileControllerManagerKC]); !slices.Equal(got, both) {
		t.Errorf("controller-manager.conf CA data after reissue: %v", got)
	}
	if strings.TrimSpace(read(t, f[layout.FileServiceAccountK])) != strings.TrimSpace(h.saNewKey) {
		t.Error("the new service-account key does not sign")
	}
	if len(res.Reissued) != 3 || !slices.Contains(res.Restart, "etcd") || !slices.Contains(res.Restart, "kube-apiserver") {
		t.Errorf("reissue: %+v", res)
	}
	if again := h.rotate(t, pki.StageReissue, pki.ScopeControlPlane, pki.KubeletClient{}); len(again.Files) != 0 {
		t.Errorf("reissue again wrote %v", again.Files)
	}
	kcert, kkey := h.next.leaf(t, "system:node:tyc1", time.Now().Add(time.Hour))
	h.rotate(t, pki.StageReissue, pki.ScopeKubelet, pki.KubeletClient{Certificate: kcert, PrivateKey: kkey})
	kpki := filepath.Join(filepath.Dir(f[layout.FileKubeletKubecfg]), "pki")
	if got := read(t, filepath.Join(kpki, "kubelet-client-current.pem")); got != kcert+kkey {
		t.Errorf("the kubelet's client certificate after reissue:\n%s", got)
	}
	if fi, err := os.Lstat(filepath.Join(kpki, "kubelet-client-current.pem")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("kubelet-client-current.pem is no longer a link (the kubelet's next rotation would fail): %v", err)
	}
	if serving, _ := firstCert([]byte(read(t, filepath.Join(kpki, "kubelet.crt")))); serving.CheckSignatureFrom(h.next.cert) != nil {
		t.Errorf("the kubelet's serving certificate after reissue is from %q", serving.Issuer.CommonName)
	}
	if _, _, mode := ownerAndMode(t, filepath.Join(kpki, "kubelet.key")); mode != 0o600 {
		t.Errorf("kubelet.key mode %o", mode)
	}

	// Drop.
	h.rotate(t, pki.StageDrop, pki.ScopeControlPlane, pki.KubeletClient{})
	h.rotate(t, pki.StageDrop, pki.ScopeKubelet, pki.KubeletClient{})
	if got := h.certs(t, f[layout.FileClusterCA]); !slices.Equal(got, []string{"kubernetes-ca-2"}) || read(t, filepath.Join(pkiDir, "ca.key")) != h.nextKey {
		t.Errorf("ca.crt after drop: %v", got)
	}
	if m := read(t, h.manifest); m != fmt.Sprintf(kcmManifest, pkiDir) {
		t.Errorf("the manifest after drop is not the original:\n%s", m)
	}
	for _, k := range []string{layout.FileControllerManagerKC, layout.FileKubeletKubecfg, layout.FileBootstrapKubecfg} {
		if got := h.kubeconfigCAs(t, f[k]); !slices.Equal(got, []string{"kubernetes-ca-2"}) {
			t.Errorf("%s after drop: %v", k, got)
		}
	}
	if !samePEM([]byte(read(t, f[layout.FileServiceAccountP])), [][]byte{[]byte(h.saNew)}) {
		t.Error("service-account.pub after drop holds more than the new key")
	}
	if got := h.certs(t, f[layout.FileEtcdServerCA]); !slices.Equal(got, []string{"etcd-ca-2"}) {
		t.Errorf("etcd's server-ca.crt after drop: %v", got)
	}
}

// A signer still sharing its file with trust points cannot be switched:
// the reissue stage refuses before writing anything.
func TestRotateCAReissueRefusesAnUnsplitSigner(t *testing.T) {
	h := newRotationHost(t)
	_, err := h.acts.RotateCA(t.Context(), pki.RotateCAInput{Target: h.target, Vault: target.Vault{Address: h.vaultURL}, Stage: pki.StageReissue, Scope: pki.ScopeControlPlane,
		Files: h.files, StaticPods: map[string]string{"kube-controller-manager": h.manifest},
		ClusterCA: pki.CARotation{Old: h.ca.pem, New: h.next.pem, Issuer: "cluster-next", Key: h.nextKey}})
	if err == nil || !strings.Contains(err.Error(), "run the trust stage first") {
		t.Fatalf("got %v", err)
	}
	if h.vault.signs != 0 {
		t.Errorf("%d certificates signed", h.vault.signs)
	}
}

// A kubelet whose client certificate is embedded in its kubeconfig (a
// controller Kedge's bootstrap made) and that rotates its certificates
// copied it to its store at its first start, and presents the store's;
// it also serves with a certificate the old CA signed (cert-renewal's
// kubelet.crt, where the layout says it is). The reissue stage writes
// the new client certificate to both, the store's still a link to a dated
// file, and issues the serving certificate anew from the new CA.
func TestRotateCAReissuesAnEmbeddedKubeletsStoreAndServingCertificate(t *testing.T) {
	h := newRotationHost(t)
	f := h.files
	kpki := filepath.Join(filepath.Dir(f[layout.FileKubeletKubecfg]), "pki")
	current := filepath.Join(kpki, "kubelet-client-current.pem")
	f[layout.FileKubeletServingCert], f[layout.FileKubeletServingKey] = filepath.Join(kpki, "kubelet.crt"), filepath.Join(kpki, "kubelet.key")
	f[layout.FileKubeletClientCurrent] = current
	oldCert, oldKey := h.ca.leaf(t, "system:node:tyc1", time.Now().Add(time.Hour))
	embedded := "    client-certificate-data: " + base64.StdEncoding.EncodeToString([]byte(oldCert)) + "\n    client-key-data: " + base64.StdEncoding.EncodeToString([]byte(oldKey)) + "\n"
	writeOwned(t, f[layout.FileKubeletKubecfg], kubeconfigDoc(h.ca.pem, embedded), 0o600, 0, 0)

	kcert, kkey := h.next.leaf(t, "system:node:tyc1", time.Now().Add(time.Hour))
	res := h.rotate(t, pki.StageReissue, pki.ScopeKubelet, pki.KubeletClient{Certificate: kcert, PrivateKey: kkey})
	if c, err := embeddedCert([]byte(read(t, f[layout.FileKubeletKubecfg]))); err != nil || c.CheckSignatureFrom(h.next.cert) != nil {
		t.Errorf("the kubelet's embedded client certificate after reissue: %v %v", c, err)
	}
	if got := read(t, current); got != kcert+kkey {
		t.Errorf("the kubelet's store after reissue:\n%s", got)
	}
	if fi, err := os.Lstat(current); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("kubelet-client-current.pem is no longer a link: %v", err)
	}
	if serving, _ := firstCert([]byte(read(t, f[layout.FileKubeletServingCert]))); serving.CheckSignatureFrom(h.next.cert) != nil || serving.Subject.CommonName != "system:node:tyc1" {
		t.Errorf("the kubelet's serving certificate after reissue is from %q", serving.Issuer.CommonName)
	}
	dated := filepath.Join(kpki, "kubelet-client-2026-01-01.pem")
	if !slices.Equal(res.Reissued, []string{f[layout.FileKubeletKubecfg], dated, f[layout.FileKubeletServingCert]}) || !slices.Equal(res.Restart, []string{"kubelet"}) {
		t.Errorf("reissued %v, restart %v", res.Reissued, res.Restart)
	}
	if again := h.rotate(t, pki.StageReissue, pki.ScopeKubelet, pki.KubeletClient{Certificate: kcert, PrivateKey: kkey}); slices.Contains(again.Reissued, f[layout.FileKubeletServingCert]) {
		t.Errorf("reissue again issued the serving certificate anew: %v", again.Reissued)
	}
}
