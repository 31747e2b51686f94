package pkihost

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kedge.dev/kedge/actions/layout"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/pki"
	"kedge.dev/kedge/actions/target"
)

// withAggregationAndAdmin adds Typhoon's front-proxy client pair (from
// its own CA) and admin.conf (embedded, from the cluster CA) to c.
func (c *typhoonController) withAggregationAndAdmin(t *testing.T, leafEnd time.Time) testCA {
	t.Helper()
	agg := newTestCA(t, "kubernetes-front-proxy-ca", c.ca.cert.NotAfter)
	c.vault.cas["front-proxy"] = agg
	pki := filepath.Join(c.root, "etc/kubernetes/pki")
	cert, key := agg.leaf(t, "kube-apiserver", leafEnd)
	adminCert, adminKey := c.ca.leaf(t, "kubernetes-admin", leafEnd)
	c.files[layout.FileAggregationCA] = filepath.Join(pki, "aggregation-ca.crt")
	c.files[layout.FileAggregationCert] = filepath.Join(pki, "aggregation-client.crt")
	c.files[layout.FileAggregationKey] = filepath.Join(pki, "aggregation-client.key")
	c.files[layout.FileAdminKC] = filepath.Join(pki, "admin.conf")
	writeOwned(t, c.files[layout.FileAggregationCA], agg.pem, 0o644, 0, 0)
	writeOwned(t, c.files[layout.FileAggregationCert], cert, 0o644, 0, 0)
	writeOwned(t, c.files[layout.FileAggregationKey], key, 0o644, 0, 0)
	writeOwned(t, c.files[layout.FileAdminKC], `apiVersion: v1
kind: Config
clusters:
- name: typhoon
  cluster:
    server: https://api.example:6443
users:
- name: typhoon
  user:
    client-certificate-data: `+base64.StdEncoding.EncodeToString([]byte(adminCert))+`
    client-key-data: `+base64.StdEncoding.EncodeToString([]byte(adminKey))+`
current-context: typhoon
contexts:
- name: typhoon
  context: {cluster: typhoon, user: typhoon}
`, 0o644, 0, 0)
	return agg
}

// Typhoon's front-proxy client certificate is renewed from the
// front-proxy CA and admin.conf from the cluster CA; force renews what
// is not due; without the front-proxy CA in Vault the renewal is refused
// before anything is installed, naming the adopt parameter.
func TestRenewInPlaceRenewsTheAggregationClientAndAdminConf(t *testing.T) {
	caEnd := time.Now().Add(8000 * time.Hour).Truncate(time.Second)
	c := newTyphoonController(t, caEnd, time.Now().Add(7000*time.Hour))
	agg := c.withAggregationAndAdmin(t, time.Now().Add(7000*time.Hour))
	in := pki.RenewInput{Target: c.target, Vault: target.Vault{Address: c.vaultURL}, Files: c.files,
		CACert: c.ca.pem, Issuer: "cluster", EtcdCACert: c.etcdCA.pem, EtcdIssuer: "etcd", Threshold: "720h", TTL: "8760h",
		Kind: layout.KindTyphoonFlatcar}

	// Nothing due: nothing renewed.
	res, err := c.acts.RenewInPlace(t.Context(), in)
	if err != nil || res.Due || len(res.Renewed) != 0 {
		t.Fatalf("nothing due: %+v (%v)", res, err)
	}

	// Forced, but the front-proxy CA was not adopted: refused, nothing
	// installed.
	in.Force = true
	before, _ := os.ReadFile(c.files[layout.FileAPIServerCert])
	_, err = c.acts.RenewInPlace(t.Context(), in)
	if !errtype.Is(err, errtype.ForeignIssuer) || !strings.Contains(err.Error(), "aggregationCAKey") {
		t.Fatalf("renewal without the front-proxy CA: %v", err)
	}
	if after, _ := os.ReadFile(c.files[layout.FileAPIServerCert]); string(after) != string(before) {
		t.Error("the refused renewal changed apiserver.crt")
	}

	in.AggregationCACert, in.AggregationIssuer = agg.pem, "front-proxy"
	res, err = c.acts.RenewInPlace(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{layout.FileAPIServerCert, layout.FileEtcdServerCert, layout.FileAggregationCert, layout.FileAdminKC} {
		if !slices.Contains(res.Renewed, c.files[f]) {
			t.Errorf("%s not renewed: %v", f, res.Renewed)
		}
	}
	b, _ := os.ReadFile(c.files[layout.FileAggregationCert])
	leaf, err := firstCert(b)
	if err != nil || leaf.CheckSignatureFrom(agg.cert) != nil || leaf.Subject.CommonName != "kube-apiserver" || !leaf.NotAfter.Equal(caEnd) {
		t.Errorf("aggregation client after: %v (%v)", leaf, err)
	}
	b, _ = os.ReadFile(c.files[layout.FileAdminKC])
	admin, err := embeddedCert(b)
	if err != nil || admin.CheckSignatureFrom(c.ca.cert) != nil || admin.Subject.CommonName != "kubernetes-admin" || !strings.Contains(string(b), "server: https://api.example:6443") {
		t.Errorf("admin.conf after: %v (%v)\n%s", admin, err, b)
	}
	if uid, gid, mode := ownerAndMode(t, c.files[layout.FileAggregationKey]); uid != 0 || gid != 0 || mode != 0o644 {
		t.Errorf("aggregation-client.key: %d:%d %o", uid, gid, mode)
	}
}
