package kubeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/internal/pubkey"
	"kedge.dev/kedge/internal/resume"
)

// Defaults of the CA rotation's waits.
const (
	DefaultKubeletCertTimeout = 2 * time.Minute
	DefaultRootCATimeout      = 3 * time.Minute
)

// kubeletClientUsages are the usages a kubelet asks for its client
// certificate with an ECDSA key (client-go's
// DefaultKubeletClientGetUsages); kube-controller-manager v1.35 signs
// for kubernetes.io/kube-apiserver-client-kubelet these, or these with
// key encipherment (an RSA key's), and fails the CSR otherwise.
var kubeletClientUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}

// csrPrefix begins the name of every CSR Kedge makes for a kubelet.
const csrPrefix = "kedge-rotate-"

func invalidInput(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, errtype.InvalidInput, nil)
}

// checkNodeName refuses what is not a Node name (a DNS-1123 subdomain).
func checkNodeName(field, name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return invalidInput(fmt.Sprintf("%s: %q is not a Node name: %s", field, name, strings.Join(errs, "; ")))
	}
	return nil
}

// kubeletCertProgress is kube.kubelet-client-cert's heartbeat: the CSR
// the attempt made and where it is, never the key. An attempt after a
// lost one deletes the lost one's CSR (its key was on the lost worker)
// and makes its own, with its own timeout.
type kubeletCertProgress struct {
	StartedAt time.Time `json:"startedAt"`
	CSRName   string    `json:"csrName"`
	State     string    `json:"state"`
}

// KubeletClientCert gives a node's kubelet a new client certificate
// (kube.kubelet-client-cert): a key made here, a CSR for
// system:node:NAME that Kedge approves and the controller manager's
// signer signs, checked to chain to the CA given. The CSR is deleted
// when done.
func (a *Activities) KubeletClientCert(ctx context.Context, in kube.KubeletClientCertInput) (kube.KubeletClientCertResult, error) {
	if err := checkNodeName("nodeName", in.NodeName); err != nil {
		return kube.KubeletClientCertResult{}, err
	}
	cas, err := pemCertificates(in.CACert)
	if err != nil {
		return kube.KubeletClientCertResult{}, invalidInput("caCert: " + err.Error())
	}
	timeout, err := parseDuration(in.Timeout, DefaultKubeletCertTimeout)
	if err != nil {
		return kube.KubeletClientCertResult{}, err
	}
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.KubeletClientCertResult{}, err
	}
	var lost kubeletCertProgress
	if resume.Load(ctx, &lost) && lost.CSRName != "" {
		a.deleteCSR(ctx, cs, lost.CSRName)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return kube.KubeletClientCertResult{}, err
	}
	req, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + in.NodeName, Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		return kube.KubeletClientCertResult{}, err
	}
	prog := kubeletCertProgress{StartedAt: time.Now(), CSRName: csrName(in.NodeName), State: "creating"}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: prog.CSRName, Labels: map[string]string{"app.kubernetes.io/managed-by": "kedge"}},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: req}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     kubeletClientUsages,
		},
	}
	err = a.whileAway(ctx, "create a CSR", func() error {
		_, err := cs.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // this attempt's, its answer lost: the name is its own
			return nil
		}
		return err
	})
	if err != nil {
		return kube.KubeletClientCertResult{}, clusterError("create CSR "+prog.CSRName, err)
	}
	defer a.deleteCSR(ctx, cs, prog.CSRName)
	prog.State = "created"
	heartbeat(ctx, prog)
	if err := a.approveCSR(ctx, cs, prog.CSRName, in.NodeName); err != nil {
		return kube.KubeletClientCertResult{}, err
	}
	certPEM, err := a.waitSigned(ctx, cs, &prog, in.NodeName, timeout)
	if err != nil {
		return kube.KubeletClientCertResult{}, err
	}
	return signedFor(in.NodeName, prog.CSRName, certPEM, key, cas)
}

// signedFor checks the signed certificate is for key and chains to one
// of cas, and makes the result.
func signedFor(node, name string, certPEM []byte, key *ecdsa.PrivateKey, cas []*x509.Certificate) (kube.KubeletClientCertResult, error) {
	certs, err := pemCertificates(string(certPEM))
	if err != nil {
		return kube.KubeletClientCertResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("CSR %s: the signed certificate: %v", name, err), errtype.KubernetesAPI, nil)
	}
	leaf := certs[0]
	if !pubkey.Equal(leaf.PublicKey, key.Public()) {
		return kube.KubeletClientCertResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("CSR %s: the signed certificate is not for the key requested", name), errtype.KubernetesAPI, nil)
	}
	chains := false
	for _, ca := range cas {
		if leaf.CheckSignatureFrom(ca) == nil {
			chains = true
		}
	}
	if !chains {
		issuer := leaf.Issuer.CommonName
		if issuer == "" {
			issuer = leaf.Issuer.String()
		}
		return kube.KubeletClientCertResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the client certificate of node %s (CSR %s) is signed by %q, not the CA given: is the controller manager's signer switched?", node, name, issuer),
			errtype.ForeignIssuer, nil)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return kube.KubeletClientCertResult{}, err
	}
	return kube.KubeletClientCertResult{
		Certificate: string(certPEM),
		PrivateKey:  string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})),
		NotAfter:    leaf.NotAfter.UTC().Format(time.RFC3339),
		Serial:      fmt.Sprintf("%x", leaf.SerialNumber),
		CSRName:     name,
	}, nil
}

// csrName is a CSR name of its own for one attempt: kedge-rotate-NODE-
// and 10 random hex digits, the node's name cut to fit 253 characters.
func csrName(node string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	suffix := "-" + hex.EncodeToString(b[:])
	if room := validation.DNS1123SubdomainMaxLength - len(csrPrefix) - len(suffix); len(node) > room {
		node = strings.TrimRight(node[:room], ".-")
	}
	return csrPrefix + node + suffix
}

// approveCSR approves the CSR, as Kedge, unless it is approved already
// (the controller manager's approver may be first); a CSR denied or
// failed is refused.
func (a *Activities) approveCSR(ctx context.Context, cs kubernetes.Interface, name, node string) error {
	csrs := cs.CertificatesV1().CertificateSigningRequests()
	err := a.whileAway(ctx, "approve a CSR", func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			csr, err := csrs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := csrRefused(csr, node); err != nil {
				return err
			}
			if c := csrConditionOf(csr, certificatesv1.CertificateApproved); c != nil {
				return nil
			}
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "KedgeCARotation",
				Message:        fmt.Sprintf("approved by Kedge: node %s's kubelet client certificate, reissued in a CA rotation", node),
				LastUpdateTime: metav1.Now(),
			})
			_, err = csrs.UpdateApproval(ctx, name, csr, metav1.UpdateOptions{})
			return err
		})
	})
	var app *temporal.ApplicationError
	if err == nil || errors.As(err, &app) {
		return err
	}
	return clusterError("approve CSR "+name, err)
}

// waitSigned waits until the CSR holds a certificate, heartbeating.
func (a *Activities) waitSigned(ctx context.Context, cs kubernetes.Interface, prog *kubeletCertProgress, node string, timeout time.Duration) ([]byte, error) {
	deadline := time.Now().Add(timeout)
	for {
		prog.State = "approved, waiting for the signer"
		csr, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, prog.CSRName, metav1.GetOptions{})
		switch {
		case err == nil:
			if err := csrRefused(csr, node); err != nil {
				return nil, err
			}
			if len(csr.Status.Certificate) > 0 {
				return csr.Status.Certificate, nil
			}
		case apierrors.IsNotFound(err):
			return nil, temporal.NewApplicationError(fmt.Sprintf("CSR %s for node %s was deleted before it was signed", prog.CSRName, node), errtype.KubernetesAPI)
		default:
			prog.State += " (" + err.Error() + ")"
		}
		heartbeat(ctx, *prog)
		if time.Now().After(deadline) {
			return nil, temporal.NewApplicationError(fmt.Sprintf("CSR %s for node %s approved but not signed after %s: does the controller manager sign %s (its --cluster-signing-cert-file, the csrsigning controller)?",
				prog.CSRName, node, timeout, certificatesv1.KubeAPIServerClientKubeletSignerName), errtype.KubernetesAPI)
		}
		select {
		case <-ctx.Done():
			return nil, temporal.NewCanceledError(ctx.Err().Error())
		case <-time.After(a.poll()):
		}
	}
}

func csrConditionOf(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequestCondition {
	for i, c := range csr.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return &csr.Status.Conditions[i]
		}
	}
	return nil
}

// csrRefused is the error of a CSR denied or failed, or nil.
func csrRefused(csr *certificatesv1.CertificateSigningRequest, node string) error {
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		if c := csrConditionOf(csr, t); c != nil {
			what := "was denied"
			if t == certificatesv1.CertificateFailed {
				what = "failed"
			}
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("CSR %s for node %s %s (%s: %s)", csr.Name, node, what, c.Reason, c.Message), errtype.CertificateRequestRefused, nil)
		}
	}
	return nil
}

// deleteCSR deletes a CSR, best effort: one left behind holds no key,
// and the controller manager's cleaner removes it within a day.
func (a *Activities) deleteCSR(ctx context.Context, cs kubernetes.Interface, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := cs.CertificatesV1().CertificateSigningRequests().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		a.log(ctx).Warn("could not delete the CSR (the controller manager's cleaner will)", "csr", name, "error", err)
	}
}

// pemCertificates reads every certificate of a PEM text; there must be
// one at least, and nothing unreadable.
func pemCertificates(s string) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := []byte(s)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return certs, nil
}

// rootCAProgress is kube.wait-root-ca's heartbeat: when the wait began,
// so a wait resumed from it keeps its deadline, and how many namespaces
// hold the bundle.
type rootCAProgress struct {
	StartedAt  time.Time `json:"startedAt"`
	Matching   int       `json:"matching"`
	Namespaces int       `json:"namespaces"`
}

// rootCAConfigMap is the ConfigMap the controller manager publishes in
// every namespace from its --root-ca-file, and its key.
const (
	rootCAConfigMap = "kube-root-ca.crt"
	rootCAKey       = "ca.crt"
)

// WaitRootCA waits until every namespace's kube-root-ca.crt holds
// exactly the certificates of the bundle, in any order
// (kube.wait-root-ca). Namespaces being deleted are not waited for.
func (a *Activities) WaitRootCA(ctx context.Context, in kube.WaitRootCAInput) (kube.WaitRootCAResult, error) {
	want, err := pemCertificates(in.Bundle)
	if err != nil {
		return kube.WaitRootCAResult{}, invalidInput("bundle: " + err.Error())
	}
	timeout, err := parseDuration(in.Timeout, DefaultRootCATimeout)
	if err != nil {
		return kube.WaitRootCAResult{}, err
	}
	settle, err := parseDuration(in.Settle, 0)
	if err != nil {
		return kube.WaitRootCAResult{}, err
	}
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.WaitRootCAResult{}, err
	}
	prog := rootCAProgress{StartedAt: resume.StartedAt(ctx)}
	deadline := prog.StartedAt.Add(timeout)
	var behind []string
	last := "not looked yet"
	for {
		b, total, err := rootCABehind(ctx, cs, want)
		switch {
		case err != nil:
			last = err.Error()
		case len(b) == 0:
			return kube.WaitRootCAResult{Namespaces: total}, a.settle(ctx, settle, prog)
		default:
			behind, last = b, ""
			prog.Matching, prog.Namespaces = total-len(b), total
		}
		heartbeat(ctx, prog)
		if time.Now().After(deadline) {
			return kube.WaitRootCAResult{}, rootCATimedOut(want, behind, prog, timeout, last, controllerManagerState(ctx, cs))
		}
		select {
		case <-ctx.Done():
			return kube.WaitRootCAResult{}, temporal.NewCanceledError(ctx.Err().Error())
		case <-time.After(a.poll()):
		}
	}
}

// settle heartbeats for d: the time kubelets take to refresh what running
// pods mount.
func (a *Activities) settle(ctx context.Context, d time.Duration, prog rootCAProgress) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		heartbeat(ctx, prog)
		select {
		case <-ctx.Done():
			return temporal.NewCanceledError(ctx.Err().Error())
		case <-time.After(min(time.Until(end), 10*time.Second)):
		}
	}
	return nil
}

func rootCATimedOut(want []*x509.Certificate, behind []string, prog rootCAProgress, timeout time.Duration, last, manager string) error {
	msg := fmt.Sprintf("%s does not hold the bundle (%s) in %d of %d namespaces after %s", rootCAConfigMap, subjects(want), len(behind), prog.Namespaces, timeout)
	if len(behind) > 0 {
		const shown = 5
		msg += ": " + strings.Join(behind[:min(shown, len(behind))], ", ")
		if len(behind) > shown {
			msg += fmt.Sprintf(" and %d more", len(behind)-shown)
		}
		msg += "; is the controller manager's --root-ca-file the bundle, and has it restarted since?"
		if manager != "" {
			msg += " " + manager
		}
	}
	if last != "" {
		msg += " (last: " + last + ")"
	}
	return temporal.NewApplicationError(msg, errtype.NotInEffect)
}

// controllerManagerState says who leads the controller managers (the one
// that publishes kube-root-ca.crt) and how each controller manager's pod
// fares: a publisher that never wrote the bundle is most often a
// controller manager that lost its lease or restarts over and over.
func controllerManagerState(ctx context.Context, cs kubernetes.Interface) string {
	const name = "kube-controller-manager"
	var parts []string
	switch l, err := cs.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{}); {
	case err != nil:
		parts = append(parts, "its Lease: "+err.Error())
	case l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "":
		parts = append(parts, "its Lease has no holder")
	default:
		held := "its Lease is held by " + *l.Spec.HolderIdentity
		if l.Spec.RenewTime != nil {
			held += fmt.Sprintf(", renewed %s ago", time.Since(l.Spec.RenewTime.Time).Round(time.Second))
		}
		if l.Spec.LeaseTransitions != nil {
			held += fmt.Sprintf(" (%d transitions)", *l.Spec.LeaseTransitions)
		}
		parts = append(parts, held)
	}
	pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	if err != nil {
		parts = append(parts, "its pods: "+err.Error())
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, name+"-") {
			parts = append(parts, p.Name+": "+containerState(p.Status.ContainerStatuses))
		}
	}
	return "The controller manager: " + strings.Join(parts, "; ") + "."
}

// containerState is a pod's first container: running since when, its
// restarts and how it last ended.
func containerState(st []corev1.ContainerStatus) string {
	if len(st) == 0 {
		return "no container status"
	}
	c := st[0]
	var s string
	switch {
	case c.State.Running != nil:
		s = "running since " + c.State.Running.StartedAt.UTC().Format(time.TimeOnly)
	case c.State.Waiting != nil:
		s = "waiting (" + c.State.Waiting.Reason + ")"
	default:
		s = "not running"
	}
	s += fmt.Sprintf(", %d restarts", c.RestartCount)
	if t := c.LastTerminationState.Terminated; t != nil {
		s += fmt.Sprintf(", last ended %s (exit %d) at %s", t.Reason, t.ExitCode, t.FinishedAt.UTC().Format(time.TimeOnly))
	}
	return s
}

// rootCABehind lists, by namespace, the namespaces whose kube-root-ca.crt
// does not hold want, each with what it holds, and how many namespaces
// there are.
func rootCABehind(ctx context.Context, cs kubernetes.Interface, want []*x509.Certificate) ([]string, int, error) {
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, fmt.Errorf("list namespaces: %w", err)
	}
	cms, err := cs.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + rootCAConfigMap})
	if err != nil {
		return nil, 0, fmt.Errorf("list the %s ConfigMaps: %w", rootCAConfigMap, err)
	}
	held := map[string]*corev1.ConfigMap{}
	for i, cm := range cms.Items {
		if cm.Name == rootCAConfigMap {
			held[cm.Namespace] = &cms.Items[i]
		}
	}
	var names []string
	for _, ns := range nss.Items {
		if ns.Status.Phase != corev1.NamespaceTerminating && ns.DeletionTimestamp == nil {
			names = append(names, ns.Name)
		}
	}
	slices.Sort(names)
	var behind []string
	for _, ns := range names {
		cm, ok := held[ns]
		if !ok {
			behind = append(behind, ns+" (no "+rootCAConfigMap+")")
			continue
		}
		data, ok := cm.Data[rootCAKey]
		if !ok {
			behind = append(behind, ns+" (no "+rootCAKey+")")
			continue
		}
		have, err := pemCertificates(data)
		if err != nil {
			behind = append(behind, fmt.Sprintf("%s (%s: %v)", ns, rootCAKey, err))
			continue
		}
		if !sameCertificates(have, want) {
			behind = append(behind, ns+" ("+subjects(have)+")")
		}
	}
	return behind, len(names), nil
}

// sameCertificates says whether a and b hold the same certificates,
// whatever their order (and repeats).
func sameCertificates(a, b []*x509.Certificate) bool {
	set := func(cs []*x509.Certificate) map[string]bool {
		m := map[string]bool{}
		for _, c := range cs {
			m[string(c.Raw)] = true
		}
		return m
	}
	sa, sb := set(a), set(b)
	if len(sa) != len(sb) {
		return false
	}
	for k := range sa {
		if !sb[k] {
			return false
		}
	}
	return true
}

func subjects(cs []*x509.Certificate) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = c.Subject.String()
	}
	return strings.Join(s, ", ")
}

// CheckNodes refuses, before anything changes, unless every Node named
// exists and is Ready (kube.check-nodes); the error names each that is
// not, with its Ready condition's reason.
func (a *Activities) CheckNodes(ctx context.Context, in kube.CheckNodesInput) (kube.CheckNodesResult, error) {
	if len(in.Nodes) == 0 {
		return kube.CheckNodesResult{}, invalidInput("nodes: name at least one Node")
	}
	for _, n := range in.Nodes {
		if err := checkNodeName("nodes", n); err != nil {
			return kube.CheckNodesResult{}, err
		}
	}
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.CheckNodesResult{}, err
	}
	var list *corev1.NodeList
	err = a.whileAway(ctx, "list nodes", func() error {
		var err error
		list, err = cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		return kube.CheckNodesResult{}, clusterError("list the Nodes", err)
	}
	byName := map[string]*corev1.Node{}
	for i, n := range list.Items {
		byName[n.Name] = &list.Items[i]
	}
	res := kube.CheckNodesResult{Ready: []string{}}
	var problems []string
	seen := map[string]bool{}
	for _, name := range in.Nodes {
		if seen[name] {
			continue
		}
		seen[name] = true
		n, ok := byName[name]
		if !ok {
			problems = append(problems, name+" (no such Node)")
		} else if why := notReady(n); why != "" {
			problems = append(problems, name+" ("+why+")")
		} else {
			res.Ready = append(res.Ready, name)
		}
	}
	if in.Only {
		var others []string
		for _, n := range list.Items {
			if !seen[n.Name] {
				others = append(others, n.Name)
			}
		}
		if len(others) > 0 {
			slices.Sort(others)
			return kube.CheckNodesResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("the cluster has Nodes the list does not name: %s (add them to the inventory)", strings.Join(others, ", ")),
				errtype.NodeNotReady, nil, map[string]any{"others": others})
		}
	}
	if len(problems) > 0 {
		return kube.CheckNodesResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%d of %d nodes are missing or not Ready: %s", len(problems), len(problems)+len(res.Ready), strings.Join(problems, ", ")),
			errtype.NodeNotReady, nil, map[string]any{"notReady": problems})
	}
	return res, nil
}

// notReady says why a Node is not Ready, or "".
func notReady(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return ""
		}
		why := "Ready=" + string(c.Status)
		for _, s := range []string{c.Reason, c.Message} {
			if s != "" {
				why += ": " + s
			}
		}
		return why
	}
	return "no Ready condition"
}
