package integration

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"kedge.dev/kedge/integration/typhoon"
)

// On the Typhoon-built cluster: cert-renewal before adopt is refused
// without making a CA; adopt takes the cluster's own CAs and
// service-account key into Vault (twice: the second run changes nothing);
// then cert-renewal with everything due renews every controller's
// certificates in place: each served certificate is new, chains to the
// ORIGINAL CA, keeps its SANs; the controller-manager's kubeconfig holds a
// new credential of the same CA; etcd's files still belong to etcd; a
// service-account token issued before is still accepted; etcd and every
// node stay healthy.
func TestAdoptTyphoonAndRenewInPlace(t *testing.T) {
	typhoonWorld(t)
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range typhoonBuilt.lab.Hosts[:3] {
				b, _ := h.ReadFile("/var/log/units/kubelet.service.log")
				t.Logf("%s kubelet log tail:\n%s", h.Name, tail(string(b), 6000))
			}
		}
	})
	cs, p, inv := typhoonBuilt.client, typhoonBuilt.pki, typhoonBuilt.inventory
	ca, etcdCA := parsePEMCert(t, p.CA()), parsePEMCert(t, p.EtcdCA())

	eventually(t, time.Minute, "the default ServiceAccount", func() bool {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(t.Context(), "default", metav1.GetOptions{})
		return err == nil
	})
	ttl := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(t.Context(), "default",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var endpoints []string
	for _, h := range typhoonBuilt.lab.Hosts[:3] {
		endpoints = append(endpoints, h.Address+":6443", h.Address+":2379")
	}
	before := map[string]*x509.Certificate{}
	for _, ep := range endpoints {
		before[ep] = servedCert(t, ep)
	}
	cmBefore := embeddedClientCert(t, readTyphoonFile(t, "tyc1", typhoon.ControllerManagerK))

	// Not adopted yet: refused before anything changes, and no CA is made
	// for the cluster (which would block adopt later).
	p0, code, errOut := runWaitInv(t, "cert-renewal", inv, "--set", "threshold=87600h")
	if code == 0 || !strings.Contains(errOut+step(t, p0, "ca").LastError, "adopt the cluster first") {
		t.Fatalf("cert-renewal before adopt: exit %d: %s\n%+v", code, errOut, p0)
	}

	assets := filepath.Join(t.TempDir(), "etcd-ca.key")
	if err := os.WriteFile(assets, p.EtcdCAKey(), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		pa, code, errOut := runWaitInv(t, "adopt", inv, "--set-file", "etcdCAKey="+assets)
		if code != 0 {
			t.Fatalf("adopt (run %d): exit %d: %s\n%+v", i+1, code, errOut, pa)
		}
	}
	for _, ep := range endpoints {
		if now := servedCert(t, ep); now.SerialNumber.Cmp(before[ep].SerialNumber) != 0 {
			t.Errorf("adopt changed what %s serves", ep)
		}
	}

	began := time.Now()
	pr, code, errOut := runWaitInv(t, "cert-renewal", inv, "--set", "threshold=87600h")
	t.Logf("cert-renewal in place on 3 controllers: %s", time.Since(began).Round(time.Second))
	if code != 0 {
		t.Fatalf("cert-renewal: exit %d: %s\n%+v", code, errOut, pr)
	}
	checkRenewed(t, endpoints, before, ca, etcdCA)
	for _, ep := range endpoints {
		after := servedCert(t, ep)
		for _, name := range before[ep].DNSNames {
			if !slices.Contains(after.DNSNames, name) {
				t.Errorf("%s: SAN %s lost: %v", ep, name, after.DNSNames)
			}
		}
		if len(after.IPAddresses) != len(before[ep].IPAddresses) {
			t.Errorf("%s: IP SANs %v, were %v", ep, after.IPAddresses, before[ep].IPAddresses)
		}
		if strings.HasSuffix(ep, ":6443") && !slices.Contains(after.DNSNames, typhoonAPIServer) {
			t.Errorf("%s: no %s in %v", ep, typhoonAPIServer, after.DNSNames)
		}
	}
	cmAfter := embeddedClientCert(t, readTyphoonFile(t, "tyc1", typhoon.ControllerManagerK))
	if cmAfter.SerialNumber.Cmp(cmBefore.SerialNumber) == 0 || cmAfter.CheckSignatureFrom(ca) != nil ||
		cmAfter.Subject.CommonName != "system:kube-controller-manager" {
		t.Errorf("controller-manager.conf: serial %x (was %x), CN %q, issuer %q", cmAfter.SerialNumber, cmBefore.SerialNumber, cmAfter.Subject.CommonName, cmAfter.Issuer)
	}
	if out, err := typhoonHost(t, "tyc2").Exec(t.Context(), "stat", "-c", "%u:%g %a", typhoon.EtcdServerKey, typhoon.EtcdPeerKey); err != nil ||
		strings.Count(string(out), "232:232 500") != 2 {
		t.Errorf("etcd's keys after the renewal: %s (%v)", out, err)
	}

	review, err := cs.AuthenticationV1().TokenReviews().Create(t.Context(),
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	if err != nil || !review.Status.Authenticated {
		t.Errorf("a token issued before the renewal: %+v (%v)", review.Status, err)
	}
	if b, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz/etcd").DoRaw(t.Context()); err != nil {
		t.Errorf("etcd after the renewal: %s (%v)", b, err)
	}
	if err := waitTyphoonReady(t.Context(), cs, typhoonNodes()); err != nil {
		t.Error(err)
	}

	// Everything renewed: a second run renews nothing.
	pr2, code, errOut := runWaitInv(t, "cert-renewal", inv)
	if code != 0 {
		t.Fatalf("cert-renewal again: exit %d: %s\n%+v", code, errOut, pr2)
	}
	for _, ep := range endpoints {
		if now := servedCert(t, ep); now.NotAfter.Before(time.Now().Add(8000 * time.Hour)) {
			t.Errorf("%s serves a certificate ending %s", ep, now.NotAfter)
		}
	}
}

func parsePEMCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("no PEM")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readTyphoonFile(t *testing.T, host, path string) []byte {
	t.Helper()
	b, err := typhoonHost(t, host).ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// embeddedClientCert is a kubeconfig's embedded client certificate.
func embeddedClientCert(t *testing.T, kc []byte) *x509.Certificate {
	t.Helper()
	var doc struct {
		Users []struct {
			User struct {
				Data string `json:"client-certificate-data"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := yaml.Unmarshal(kc, &doc); err != nil || len(doc.Users) != 1 {
		t.Fatalf("kubeconfig: %v\n%s", err, kc)
	}
	b, err := base64.StdEncoding.DecodeString(doc.Users[0].User.Data)
	if err != nil {
		t.Fatal(err)
	}
	return parsePEMCert(t, b)
}
