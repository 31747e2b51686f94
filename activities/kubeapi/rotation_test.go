package kubeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/certificate"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

func newTestCA(t *testing.T, cn string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return testCA{cert: cert, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

var csrResource = certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")

func csrCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	return slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
		return c.Type == t && c.Status == corev1.ConditionTrue
	})
}

// kubeletClientRequest is what kube-controller-manager v1.35's csrsigning
// controller checks of a kubelet client CSR before it signs
// (pkg/apis/certificates ValidateKubeletClientCSR): "" when it signs.
func kubeletClientRequest(csr *certificatesv1.CertificateSigningRequest) string {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return "no CERTIFICATE REQUEST block"
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil || req.CheckSignature() != nil {
		return "unreadable request"
	}
	usages := map[certificatesv1.KeyUsage]bool{}
	for _, u := range csr.Spec.Usages {
		usages[u] = true
	}
	noRSA := len(usages) == 2 && usages[certificatesv1.UsageDigitalSignature] && usages[certificatesv1.UsageClientAuth]
	rsa := len(usages) == 3 && usages[certificatesv1.UsageDigitalSignature] && usages[certificatesv1.UsageClientAuth] && usages[certificatesv1.UsageKeyEncipherment]
	switch {
	case csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName:
		return "signer " + csr.Spec.SignerName
	case !slices.Equal(req.Subject.Organization, []string{"system:nodes"}):
		return "organization is not system:nodes"
	case len(req.DNSNames)+len(req.EmailAddresses)+len(req.IPAddresses)+len(req.URIs) > 0:
		return "SANs not allowed"
	case !strings.HasPrefix(req.Subject.CommonName, "system:node:"):
		return "common name does not begin with system:node:"
	case !noRSA && !rsa:
		return fmt.Sprintf("usages did not match: %v", csr.Spec.Usages)
	}
	return ""
}

// playSigner makes the fake API server play the controller manager's
// signer: an approved kubelet client CSR is signed with ca the next time
// it is read, or failed as the csrsigning controller fails one it
// refuses (or any, with refuse).
func playSigner(cs *fake.Clientset, ca testCA, refuse string) {
	cs.PrependReactor("get", "certificatesigningrequests", func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := cs.Tracker().Get(csrResource, "", action.(k8stesting.GetAction).GetName())
		if err != nil {
			return false, nil, nil
		}
		csr := obj.(*certificatesv1.CertificateSigningRequest).DeepCopy()
		if !csrCondition(csr, certificatesv1.CertificateApproved) || csrCondition(csr, certificatesv1.CertificateFailed) || len(csr.Status.Certificate) > 0 {
			return false, nil, nil
		}
		why := kubeletClientRequest(csr)
		if why == "" && refuse != "" {
			why = refuse
		}
		if why != "" {
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: "SignerValidationFailure", Message: why})
		} else {
			block, _ := pem.Decode(csr.Spec.Request)
			req, _ := x509.ParseCertificateRequest(block.Bytes)
			serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
			tmpl := &x509.Certificate{SerialNumber: serial, Subject: req.Subject,
				NotBefore: time.Now().Add(-5 * time.Minute), NotAfter: time.Now().Add(365 * 24 * time.Hour),
				KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, req.PublicKey, ca.key)
			if err != nil {
				return true, nil, err
			}
			csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		}
		_ = cs.Tracker().Update(csrResource, csr, "")
		return false, nil, nil
	})
}

func csrNames(t *testing.T, cs *fake.Clientset) []string {
	t.Helper()
	l, err := cs.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range l.Items {
		names = append(names, c.Name)
	}
	return names
}

func appErr(t *testing.T, err error, typ string, nonRetryable bool, words ...string) {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !errtype.Is(err, typ) || app.NonRetryable() != nonRetryable {
		t.Fatalf("got %v, want a %s error (non-retryable %t)", err, typ, nonRetryable)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

func TestKubeletClientCertIsSignedByTheCAGiven(t *testing.T) {
	a, cs := fakeActs()
	ca := newTestCA(t, "new-ca")
	playSigner(cs, ca, "")
	var seen *certificatesv1.CertificateSigningRequest
	cs.PrependReactor("delete", "certificatesigningrequests", func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := cs.Tracker().Get(csrResource, "", action.(k8stesting.DeleteAction).GetName())
		if err == nil {
			seen = obj.(*certificatesv1.CertificateSigningRequest)
		}
		return false, nil, nil
	})
	// A Node name as long as a name may be still makes a valid CSR name.
	long := strings.Repeat("n", 60) + "." + strings.Repeat("o", 60) + "." + strings.Repeat("d", 60) + "." + strings.Repeat("e", 63) + ".x"
	for _, name := range []string{"w1", long} {
		res, err := a.KubeletClientCert(context.Background(), kube.KubeletClientCertInput{NodeName: name, CACert: ca.pem})
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair([]byte(res.Certificate), []byte(res.PrivateKey))
		if err != nil {
			t.Fatalf("the certificate is not for the key returned: %v", err)
		}
		leaf, _ := x509.ParseCertificate(pair.Certificate[0])
		if leaf.Subject.CommonName != "system:node:"+name || !slices.Equal(leaf.Subject.Organization, []string{"system:nodes"}) {
			t.Errorf("subject %s", leaf.Subject)
		}
		if _, ok := pair.PrivateKey.(*ecdsa.PrivateKey); !ok {
			t.Errorf("key %T, want ECDSA", pair.PrivateKey)
		}
		if res.Serial != fmt.Sprintf("%x", leaf.SerialNumber) || res.NotAfter != leaf.NotAfter.UTC().Format(time.RFC3339) {
			t.Errorf("serial %s notAfter %s, certificate has %x %s", res.Serial, res.NotAfter, leaf.SerialNumber, leaf.NotAfter)
		}
		if errs := validation.IsDNS1123Subdomain(res.CSRName); len(errs) > 0 || !strings.HasPrefix(res.CSRName, "kedge-rotate-") {
			t.Errorf("CSR name %q: %v", res.CSRName, errs)
		}
		if seen == nil || seen.Name != res.CSRName {
			t.Fatalf("CSR %s was not deleted", res.CSRName)
		}
		// What the kubelet itself asks for with an ECDSA key.
		if want := certificate.DefaultKubeletClientGetUsages(pair.PrivateKey); !slices.Equal(seen.Spec.Usages, want) {
			t.Errorf("usages %v, the kubelet asks %v", seen.Spec.Usages, want)
		}
		approved := slices.IndexFunc(seen.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
			return c.Type == certificatesv1.CertificateApproved
		})
		if approved < 0 || !strings.Contains(seen.Status.Conditions[approved].Message, "Kedge") || seen.Status.Conditions[approved].Reason == "" {
			t.Errorf("conditions %+v, want an approval naming Kedge", seen.Status.Conditions)
		}
	}
	if left := csrNames(t, cs); len(left) > 0 {
		t.Errorf("CSRs left: %v", left)
	}
}

func TestKubeletClientCertFromAnotherCAIsRefused(t *testing.T) {
	a, cs := fakeActs()
	playSigner(cs, newTestCA(t, "old-ca"), "")
	_, err := a.KubeletClientCert(context.Background(), kube.KubeletClientCertInput{NodeName: "w1", CACert: newTestCA(t, "new-ca").pem})
	appErr(t, err, errtype.ForeignIssuer, true, `signed by "old-ca"`, "not the CA given", "signer switched")
	if left := csrNames(t, cs); len(left) > 0 {
		t.Errorf("CSRs left: %v", left)
	}
}

func TestKubeletClientCertDeniedOrFailedIsRefused(t *testing.T) {
	ca := newTestCA(t, "new-ca")
	t.Run("denied", func(t *testing.T) {
		a, cs := fakeActs()
		playSigner(cs, ca, "")
		// Another approver denies it as soon as it is made: Kedge does
		// not approve it over that.
		cs.PrependReactor("create", "certificatesigningrequests", func(action k8stesting.Action) (bool, runtime.Object, error) {
			csr := action.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "PolicySaysNo", Message: "not today"})
			return false, nil, nil
		})
		_, err := a.KubeletClientCert(context.Background(), kube.KubeletClientCertInput{NodeName: "w1", CACert: ca.pem})
		appErr(t, err, errtype.CertificateRequestRefused, true, "denied", "PolicySaysNo", "not today")
		for _, act := range cs.Actions() {
			if act.GetSubresource() == "approval" {
				t.Errorf("a denied CSR was approved: %v", act)
			}
		}
	})
	t.Run("failed", func(t *testing.T) {
		a, cs := fakeActs()
		playSigner(cs, ca, "the signer is out of ink")
		_, err := a.KubeletClientCert(context.Background(), kube.KubeletClientCertInput{NodeName: "w1", CACert: ca.pem})
		appErr(t, err, errtype.CertificateRequestRefused, true, "failed", "SignerValidationFailure", "out of ink")
		if left := csrNames(t, cs); len(left) > 0 {
			t.Errorf("CSRs left: %v", left)
		}
	})
}

// rotationEnv runs kube.kubelet-client-cert and kube.wait-root-ca in a test activity
// environment, after a lost attempt's heartbeat when details is not nil,
// and collects its heartbeats as JSON.
func rotationEnv(a *Activities, details any) (*testsuite.TestActivityEnvironment, *[]string) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	if details != nil {
		env.SetHeartbeatDetails(details)
	}
	env.RegisterActivityWithOptions(a.KubeletClientCert, activity.RegisterOptions{Name: kube.KubeletClientCertAction})
	env.RegisterActivityWithOptions(a.WaitRootCA, activity.RegisterOptions{Name: kube.WaitRootCAAction})
	beats := &[]string{}
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var v json.RawMessage
		_ = d.Get(&v)
		*beats = append(*beats, string(v))
	})
	return env, beats
}

func TestKubeletClientCertNotSignedInTimeFails(t *testing.T) {
	a, cs := fakeActs() // no signer
	env, beats := rotationEnv(a, nil)
	_, err := within(t, time.Minute, func() (any, error) {
		return env.ExecuteActivity(kube.KubeletClientCertAction, kube.KubeletClientCertInput{NodeName: "w1", CACert: newTestCA(t, "new-ca").pem, Timeout: "300ms"})
	})
	appErr(t, err, errtype.KubernetesAPI, false, "not signed after 300ms", "kedge-rotate-w1-")
	if len(*beats) == 0 || !strings.Contains((*beats)[len(*beats)-1], "kedge-rotate-w1-") || !strings.Contains((*beats)[len(*beats)-1], "approved") {
		t.Errorf("heartbeats %v do not name the CSR and where it is", *beats)
	}
	for _, b := range *beats {
		if strings.Contains(b, "PRIVATE KEY") {
			t.Fatalf("a heartbeat holds the key: %s", b)
		}
	}
	if left := csrNames(t, cs); len(left) > 0 {
		t.Errorf("CSRs left: %v", left)
	}
}

// A lost attempt's CSR is of no use (its key was on the lost worker):
// the next attempt deletes it and makes its own.
func TestKubeletClientCertResumedDeletesTheLostAttemptsCSR(t *testing.T) {
	a, cs := fakeActs()
	ca := newTestCA(t, "new-ca")
	playSigner(cs, ca, "")
	lost := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "kedge-rotate-w1-lost"}}
	if _, err := cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(), lost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env, _ := rotationEnv(a, kubeletCertProgress{StartedAt: time.Now().Add(-time.Minute), CSRName: lost.Name, State: "approved"})
	if _, err := env.ExecuteActivity(kube.KubeletClientCertAction, kube.KubeletClientCertInput{NodeName: "w1", CACert: ca.pem}); err != nil {
		t.Fatal(err)
	}
	if left := csrNames(t, cs); len(left) > 0 {
		t.Errorf("CSRs left: %v", left)
	}
}

func TestKubeletClientCertRefusesBadInputBeforeAnyCall(t *testing.T) {
	ca := newTestCA(t, "new-ca")
	for _, in := range []kube.KubeletClientCertInput{
		{NodeName: "", CACert: ca.pem},
		{NodeName: "W1", CACert: ca.pem},
		{NodeName: "w1/../../x", CACert: ca.pem},
		{NodeName: "w1 x", CACert: ca.pem},
		{NodeName: "-w1", CACert: ca.pem},
		{NodeName: strings.Repeat("a", 254), CACert: ca.pem},
		{NodeName: "w1", CACert: ""},
		{NodeName: "w1", CACert: "-----BEGIN CERTIFICATE-----\nnot one\n-----END CERTIFICATE-----\n"},
		{NodeName: "w1", CACert: ca.pem, Timeout: "soon"},
	} {
		a, cs := fakeActs()
		_, err := a.KubeletClientCert(context.Background(), in)
		appErr(t, err, errtype.InvalidInput, true)
		if acts := cs.Actions(); len(acts) > 0 {
			t.Errorf("%q: the API server was asked %v", in.NodeName, acts)
		}
	}
}

func rootCAMap(ns, data string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": data}}
}

func namespaces(t *testing.T, cs *fake.Clientset, names ...string) {
	t.Helper()
	for _, n := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
		if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func putRootCA(t *testing.T, cs *fake.Clientset, ns, data string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, rootCAMap(ns, data), metav1.UpdateOptions{}); err == nil {
		return
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, rootCAMap(ns, data), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestWaitRootCAComparesSetsOfCertificates(t *testing.T) {
	a, cs := fakeActs()
	old, next := newTestCA(t, "old-ca"), newTestCA(t, "new-ca")
	namespaces(t, cs, "default", "kube-system")
	putRootCA(t, cs, "default", next.pem+old.pem)
	putRootCA(t, cs, "kube-system", old.pem+"\n"+next.pem)
	// A namespace being deleted gets no copy: it is not waited for.
	gone := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	_, _ = cs.CoreV1().Namespaces().Create(context.Background(), gone, metav1.CreateOptions{})
	res, err := a.WaitRootCA(context.Background(), kube.WaitRootCAInput{Bundle: old.pem + next.pem})
	if err != nil || res.Namespaces != 2 {
		t.Fatalf("got %+v %v, want 2 namespaces", res, err)
	}
}

func TestWaitRootCAWaitsUntilEveryNamespaceHoldsTheBundle(t *testing.T) {
	a, cs := fakeActs()
	old, next := newTestCA(t, "old-ca"), newTestCA(t, "new-ca")
	namespaces(t, cs, "default", "kube-system")
	putRootCA(t, cs, "default", old.pem)
	putRootCA(t, cs, "kube-system", old.pem+next.pem)
	env, beats := rotationEnv(a, nil)
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var p rootCAProgress
		_ = d.Get(&p)
		*beats = append(*beats, fmt.Sprintf("%d/%d", p.Matching, p.Namespaces))
		// The controller manager publishes the bundle once the wait has
		// seen the namespace behind.
		putRootCA(t, cs, "default", next.pem+old.pem)
	})
	v, err := within(t, time.Minute, func() (any, error) {
		return env.ExecuteActivity(kube.WaitRootCAAction, kube.WaitRootCAInput{Bundle: old.pem + next.pem, Timeout: "30s"})
	})
	if err != nil {
		t.Fatal(err)
	}
	var res kube.WaitRootCAResult
	_ = v.(converter.EncodedValue).Get(&res)
	if res.Namespaces != 2 || len(*beats) == 0 || (*beats)[0] != "1/2" {
		t.Errorf("result %+v, heartbeats %v: want 2 namespaces after a heartbeat saying 1/2", res, *beats)
	}
}

func TestWaitRootCATimesOutNamingWhatDiffers(t *testing.T) {
	a, cs := fakeActs()
	old, next, stray := newTestCA(t, "old-ca"), newTestCA(t, "new-ca"), newTestCA(t, "stray-ca")
	namespaces(t, cs, "a0", "a1", "a2", "a3", "a4", "a5", "a6", "ok")
	putRootCA(t, cs, "ok", next.pem+old.pem)
	putRootCA(t, cs, "a0", old.pem+next.pem+stray.pem) // one too many
	// a1 has none yet
	for _, ns := range []string{"a2", "a3", "a4", "a5", "a6"} {
		putRootCA(t, cs, ns, old.pem) // one short
	}
	// The controller manager that publishes them restarts over and over.
	holder, transitions := "ctl-1_0a1b", int32(4)
	if _, err := cs.CoordinationV1().Leases("kube-system").Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager", Namespace: "kube-system"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseTransitions: &transitions},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("kube-system").Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager-ctl-1", Namespace: "kube-system"},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			RestartCount:         6,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}},
		}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := a.WaitRootCA(context.Background(), kube.WaitRootCAInput{Bundle: old.pem + next.pem, Timeout: "200ms"})
	appErr(t, err, errtype.NotInEffect, false, "7 of 8 namespaces",
		"a0 (CN=old-ca, CN=new-ca, CN=stray-ca)", "a1 (no kube-root-ca.crt)", "a2 (CN=old-ca)", "and 2 more",
		"Lease is held by ctl-1_0a1b (4 transitions)", "kube-controller-manager-ctl-1: waiting (CrashLoopBackOff), 6 restarts, last ended Error (exit 1)")
	if strings.Contains(err.Error(), "a5") || strings.Contains(err.Error(), "ok (") {
		t.Errorf("error %q names more than 5 namespaces", err)
	}
}

func TestWaitRootCARefusesABadBundle(t *testing.T) {
	a, _ := fakeActs()
	for _, b := range []string{"", "ca.crt", "-----BEGIN CERTIFICATE-----\nbad\n-----END CERTIFICATE-----\n"} {
		_, err := a.WaitRootCA(context.Background(), kube.WaitRootCAInput{Bundle: b})
		appErr(t, err, errtype.InvalidInput, true)
	}
}

func nodeWithReady(name string, st corev1.ConditionStatus, reason, msg string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, Reason: reason, Message: msg}}}}
}

func TestCheckNodesPassesWhenEveryNodeIsReady(t *testing.T) {
	a, _ := fakeActs(node("c1", true, "v1.35.4"), node("w1", true, "v1.35.4"), node("w2", false, "v1.35.4"))
	res, err := a.CheckNodes(context.Background(), kube.CheckNodesInput{Nodes: []string{"w1", "c1"}})
	if err != nil || !slices.Equal(res.Ready, []string{"w1", "c1"}) {
		t.Fatalf("got %+v %v", res, err)
	}
}

// With only, a Node the list does not name is refused: a CA rotation
// would leave its kubelet trusting the old CA alone.
func TestCheckNodesOnlyRefusesANodeNotListed(t *testing.T) {
	a, _ := fakeActs(node("c1", true, "v1.35.4"), node("w1", true, "v1.35.4"), node("w9", true, "v1.35.4"))
	if _, err := a.CheckNodes(context.Background(), kube.CheckNodesInput{Nodes: []string{"c1", "w1"}}); err != nil {
		t.Fatalf("without only: %v", err)
	}
	_, err := a.CheckNodes(context.Background(), kube.CheckNodesInput{Nodes: []string{"c1", "w1"}, Only: true})
	appErr(t, err, errtype.NodeNotReady, true, "w9 (add them to the inventory)")
}

func TestCheckNodesRefusesNamingEveryNodeMissingOrNotReady(t *testing.T) {
	a, _ := fakeActs(node("c1", true, "v1.35.4"),
		nodeWithReady("w1", corev1.ConditionFalse, "KubeletNotReady", "container runtime is down"),
		nodeWithReady("w2", corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w3"}})
	_, err := a.CheckNodes(context.Background(), kube.CheckNodesInput{Nodes: []string{"c1", "w1", "w2", "w3", "w4", "w4"}})
	appErr(t, err, errtype.NodeNotReady, true, "4 of 5 nodes",
		"w1 (Ready=False: KubeletNotReady: container runtime is down)",
		"w2 (Ready=Unknown: NodeStatusUnknown: Kubelet stopped posting node status.)",
		"w3 (no Ready condition)", "w4 (no such Node)")
	if strings.Contains(err.Error(), "c1") {
		t.Errorf("error %q names a Ready node", err)
	}
}

func TestCheckNodesRefusesBadInput(t *testing.T) {
	for _, nodes := range [][]string{nil, {"w1", "W2"}, {""}} {
		a, cs := fakeActs()
		_, err := a.CheckNodes(context.Background(), kube.CheckNodesInput{Nodes: nodes})
		appErr(t, err, errtype.InvalidInput, true)
		if acts := cs.Actions(); len(acts) > 0 {
			t.Errorf("%v: the API server was asked %v", nodes, acts)
		}
	}
}

// With settle, the wait goes on that long once the ConfigMaps hold the
// bundle: the kubelets' time to refresh what running pods mount.
func TestWaitRootCASettles(t *testing.T) {
	a, cs := fakeActs()
	ca := newTestCA(t, "new-ca")
	namespaces(t, cs, "default")
	putRootCA(t, cs, "default", ca.pem)
	began := time.Now()
	if _, err := a.WaitRootCA(context.Background(), kube.WaitRootCAInput{Bundle: ca.pem, Settle: "300ms"}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Errorf("returned after %s, before the settle time", took)
	}
	if _, err := a.WaitRootCA(context.Background(), kube.WaitRootCAInput{Bundle: ca.pem, Settle: "a while"}); err == nil {
		t.Error("settle a while accepted")
	}
}
