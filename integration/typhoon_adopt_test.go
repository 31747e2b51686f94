package integration

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"maps"
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
	"kedge.dev/kedge/workflows"
)

// On the Typhoon-built cluster (Typhoon's own files: every CA lives as
// long as its leaves, 8760 h): cert-renewal before adopt is refused
// without making a CA; adopt takes the cluster's three CAs (cluster,
// etcd, front-proxy) and service-account key into Vault (twice: the
// second run changes nothing). With a CA ending within the window,
// cert-renewal refuses before any host changes, naming ca-rotation. Forced
// within the CAs' life, it renews every controller's certificates in
// place — what the API server and etcd serve, etcd's peer and client
// pairs, the front-proxy client, the controller-manager's, scheduler's
// and admin's kubeconfigs — each chaining to its ORIGINAL CA and ending
// no later than it, every file keeping Typhoon's mode and owner (0644
// root in /etc/kubernetes/pki, etcd's 0500), the control plane back and
// running as 65534; a service-account token issued before is still
// accepted; etcd and every node stay healthy.
func TestAdoptTyphoonAndRenewInPlace(t *testing.T) {
	typhoonLane.join(t)
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
	// ca-rotation too, and it makes no service-account key pair either
	// (one made here would make adopt below refuse: a key recorded).
	prot, code, errOut := runWaitInv(t, "ca-rotation", inv)
	if code == 0 || !strings.Contains(errOut+step(t, prot, "ca").LastError, "adopt the cluster first") {
		t.Fatalf("ca-rotation before adopt: exit %d: %s\n%+v", code, errOut, prot)
	}
	if st := step(t, prot, "service-account").State; st == workflows.StateSucceeded {
		t.Errorf("ca-rotation before adopt read or made a service-account key pair (step %s)", st)
	}

	keys := t.TempDir()
	etcdKey, aggKey := filepath.Join(keys, "etcd-ca.key"), filepath.Join(keys, "aggregation-ca.key")
	for f, k := range map[string][]byte{etcdKey: p.EtcdCAKey(), aggKey: p.AggregationCAKey()} {
		if err := os.WriteFile(f, k, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The front-proxy CA's key is required: the API servers name that CA.
	pa, code, errOut := runWaitInv(t, "adopt", inv, "--set-file", "etcdCAKey="+etcdKey)
	if code == 0 || !strings.Contains(errOut+step(t, pa, "adopt").LastError, "aggregationCAKey") {
		t.Fatalf("adopt without the front-proxy CA's key: exit %d: %s\n%+v", code, errOut, pa)
	}
	for i := range 2 {
		pa, code, errOut := runWaitInv(t, "adopt", inv, "--set-file", "etcdCAKey="+etcdKey, "--set-file", "aggregationCAKey="+aggKey)
		if code != 0 {
			t.Fatalf("adopt (run %d): exit %d: %s\n%+v", i+1, code, errOut, pa)
		}
	}
	for _, ep := range endpoints {
		if now := servedCert(t, ep); now.SerialNumber.Cmp(before[ep].SerialNumber) != 0 {
			t.Errorf("adopt changed what %s serves", ep)
		}
	}
	typhoonBuilt.adopted = true

	// Every CA ends within a window of 10 years: refused before any host
	// changes.
	files := []string{typhoon.APIServerCert, typhoon.APIServerKey, typhoon.EtcdClientCert, typhoon.AggregationCert, typhoon.AdminK,
		typhoon.ControllerManagerK, typhoon.SchedulerK, typhoon.EtcdServerCert, typhoon.EtcdPeerCert}
	snapshot := func() map[string]string {
		out := map[string]string{}
		for _, h := range []string{"tyc1", "tyc2", "tyc3"} {
			for _, f := range files {
				out[h+":"+f] = string(readTyphoonFile(t, h, f))
			}
		}
		return out
	}
	unchanged := snapshot()
	pw, code, errOut := runWaitInv(t, "cert-renewal", inv, "--set", "threshold=87600h")
	if code == 0 || !strings.Contains(step(t, pw, "ca-life").LastError, "ca-rotation") {
		t.Fatalf("cert-renewal with the CAs inside the window: exit %d: %s\n%+v", code, errOut, pw)
	}
	if !maps.Equal(snapshot(), unchanged) {
		t.Error("the refused renewal changed a controller's files")
	}

	// A key its reader cannot read (tyc1's apiserver.key made 0600 root,
	// the API server runs as 65534): the renewal keeps that mode, the
	// check as the reader's uid refuses it before anything restarts, and
	// the undo puts tyc1's files back; what it serves does not change.
	tyc1 := typhoonHost(t, "tyc1")
	if out, err := tyc1.Exec(t.Context(), "chmod", "0600", typhoon.APIServerKey); err != nil {
		t.Fatalf("chmod: %v %s", err, out)
	}
	id := startRunInv(t, "cert-renewal", inv, "--set", "force=true")
	ro := rolloutOf(t, id, "controllers-in-place")
	var paused workflows.Progress
	eventually(t, 5*time.Minute, "the controllers' rollout to pause at tyc1's failure", func() bool {
		p, ok := progressOf(t, ro)
		paused = p
		return ok && p.State == workflows.StateWaiting
	})
	if st := step(t, paused, "tyc1"); st.State != workflows.StateFailed || !strings.Contains(st.LastError, "apiserver.key") || !strings.Contains(st.LastError, "65534") {
		t.Errorf("tyc1 with a key its reader cannot read: %s: %s", st.State, st.LastError)
	}
	if out, errOut, code := kedge(t, "approve", id, "--decision", "abort", "--by", "sre-on-call", "--output", "json"); code != 0 {
		t.Fatalf("kedge approve --decision abort: exit %d: %s %s", code, out, errOut)
	}
	if err := waitClosed(t, id, 3*time.Minute); err == nil {
		t.Error("the aborted renewal succeeded")
	}
	if !maps.Equal(snapshot(), unchanged) {
		t.Error("the refused renewal left a controller's files changed")
	}
	for _, ep := range endpoints {
		if now := servedCert(t, ep); now.SerialNumber.Cmp(before[ep].SerialNumber) != 0 {
			t.Errorf("the refused renewal changed what %s serves", ep)
		}
	}
	if out, err := tyc1.Exec(t.Context(), "chmod", "0644", typhoon.APIServerKey); err != nil {
		t.Fatalf("chmod: %v %s", err, out)
	}

	began := time.Now()
	pr, code, errOut := runWaitInv(t, "cert-renewal", inv, "--set", "force=true")
	t.Logf("cert-renewal in place on 3 controllers: %s", time.Since(began).Round(time.Second))
	if code != 0 {
		t.Fatalf("cert-renewal: exit %d: %s\n%+v", code, errOut, pr)
	}
	aggCA := parsePEMCert(t, p.AggregationCA())
	for _, ep := range endpoints {
		after := servedCert(t, ep)
		want := ca
		if strings.HasSuffix(ep, ":2379") {
			want = etcdCA
		}
		if after.SerialNumber.Cmp(before[ep].SerialNumber) == 0 || after.CheckSignatureFrom(want) != nil || after.NotAfter.After(want.NotAfter) {
			t.Errorf("%s serves serial %x from %q ending %s (CA ends %s)", ep, after.SerialNumber, after.Issuer, after.NotAfter, want.NotAfter)
		}
		for _, name := range before[ep].DNSNames {
			if !slices.Contains(after.DNSNames, name) {
				t.Errorf("%s: SAN %s lost: %v", ep, name, after.DNSNames)
			}
		}
		if len(after.IPAddresses) != len(before[ep].IPAddresses) {
			t.Errorf("%s: IP SANs %v, were %v", ep, after.IPAddresses, before[ep].IPAddresses)
		}
	}
	for _, h := range []string{"tyc1", "tyc2", "tyc3"} {
		for f, issuer := range map[string]*x509.Certificate{typhoon.EtcdClientCert: etcdCA, typhoon.EtcdPeerCert: etcdCA, typhoon.AggregationCert: aggCA} {
			c := parsePEMCert(t, readTyphoonFile(t, h, f))
			if string(readTyphoonFile(t, h, f)) == unchanged[h+":"+f] || c.CheckSignatureFrom(issuer) != nil {
				t.Errorf("%s:%s not renewed from %s (issuer %s)", h, f, issuer.Subject.CommonName, c.Issuer)
			}
		}
		for _, f := range []string{typhoon.ControllerManagerK, typhoon.SchedulerK, typhoon.AdminK} {
			c := embeddedClientCert(t, readTyphoonFile(t, h, f))
			if string(readTyphoonFile(t, h, f)) == unchanged[h+":"+f] || c.CheckSignatureFrom(ca) != nil {
				t.Errorf("%s:%s not renewed from the cluster CA (issuer %s)", h, f, c.Issuer)
			}
		}
		host := typhoonHost(t, h)
		out, err := host.Exec(t.Context(), "sh", "-c", "stat -c '%n %U:%G %a' /etc/kubernetes/pki/* /etc/ssl/etcd/etcd/*")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			want := " root:root 644"
			if strings.HasPrefix(line, "/etc/ssl/etcd/") {
				want = " etcd:etcd 500"
			}
			if !strings.HasSuffix(line, want) {
				t.Errorf("%s: %s, want%s", h, line, want)
			}
		}
		for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			if out, err := host.Exec(t.Context(), "ps", "-o", "uid=", "-C", c); err != nil || strings.TrimSpace(string(out)) != "65534" {
				t.Errorf("%s: %s after the renewal: %q (%v)", h, c, out, err)
			}
		}
	}
	if out, err := typhoonHost(t, "tyc2").Exec(t.Context(), "stat", "-c", "%u:%g %a", typhoon.EtcdServerKey, typhoon.EtcdPeerKey); err != nil ||
		strings.Count(string(out), "232:232 500") != 2 {
		t.Errorf("etcd's keys after the renewal: %s (%v)", out, err)
	}
	cmAfter := embeddedClientCert(t, readTyphoonFile(t, "tyc1", typhoon.ControllerManagerK))
	if cmAfter.SerialNumber.Cmp(cmBefore.SerialNumber) == 0 || cmAfter.CheckSignatureFrom(ca) != nil ||
		cmAfter.Subject.CommonName != "system:kube-controller-manager" {
		t.Errorf("controller-manager.conf: serial %x (was %x), CN %q, issuer %q", cmAfter.SerialNumber, cmBefore.SerialNumber, cmAfter.Subject.CommonName, cmAfter.Issuer)
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

	// Nothing is due now: a run without force renews nothing.
	renewed := snapshot()
	pr2, code, errOut := runWaitInv(t, "cert-renewal", inv)
	if code != 0 {
		t.Fatalf("cert-renewal again: exit %d: %s\n%+v", code, errOut, pr2)
	}
	if !maps.Equal(snapshot(), renewed) {
		t.Error("a renewal with nothing due changed a controller's files")
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
