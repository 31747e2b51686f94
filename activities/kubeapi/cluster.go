package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/activities/nodefiles"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/target"
)

// maxTokenTTL bounds a join token's life: a token is minted for one join.
const maxTokenTTL = 24 * time.Hour

// SaveKubeconfig writes a kubeconfig to the inventory's
// kubernetes.kubeconfig path on the worker (kube.save-kubeconfig), mode
// 0600, atomically: after a bootstrap, the kube actions that follow reach
// the new cluster through it. With several workers, that path must be on
// storage they share (or the runbook run by one worker).
//
// The content comes from a run, and every later kube action of every run
// on the cluster loads it, so it may carry only embedded certificates and
// keys (Saveable): no exec plugin, token file or file reference. That its
// servers are the inventory's is the worker's credential guard's check
// (worker/trust), which holds the inventory.
func (a *Activities) SaveKubeconfig(ctx context.Context, in kube.SaveKubeconfigInput) (kube.ChangedResult, error) {
	if in.Cluster.Kubeconfig == "" {
		return kube.ChangedResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("cluster %s: the inventory names no kubernetes.kubeconfig to save to", in.Cluster.Name), errtype.InvalidInput, nil)
	}
	if _, err := Saveable(in.Content); err != nil {
		return kube.ChangedResult{}, a.refuse(ctx, in.Cluster, fmt.Errorf("the kubeconfig to save: %w", err))
	}
	return a.writeKubeconfig(in.Cluster, in.Content)
}

// writeKubeconfig replaces the worker's kubeconfig of cluster with
// content, atomically, as the worker's own 0600 file, and forgets the
// clients built from the old one.
func (a *Activities) writeKubeconfig(cluster target.Kube, content string) (kube.ChangedResult, error) {
	if old, err := os.ReadFile(cluster.Kubeconfig); err == nil && string(old) == content {
		return kube.ChangedResult{}, nil
	}
	dir := filepath.Dir(cluster.Kubeconfig)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return kube.ChangedResult{}, fmt.Errorf("save kubeconfig: %w", err)
	}
	f, err := os.CreateTemp(dir, ".kubeconfig-*") // 0600, the worker's own
	if err != nil {
		return kube.ChangedResult{}, fmt.Errorf("save kubeconfig: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return kube.ChangedResult{}, fmt.Errorf("save kubeconfig: %w", err)
	}
	if err := f.Close(); err != nil {
		return kube.ChangedResult{}, fmt.Errorf("save kubeconfig: %w", err)
	}
	if err := os.Rename(f.Name(), cluster.Kubeconfig); err != nil {
		return kube.ChangedResult{}, fmt.Errorf("save kubeconfig: %w", err)
	}
	// Clients built from the old file are stale now.
	a.mu.Lock()
	for c := range a.cache {
		if c.Kubeconfig == cluster.Kubeconfig {
			delete(a.cache, c)
		}
	}
	a.mu.Unlock()
	return kube.ChangedResult{Changed: true}, nil
}

// CreateBootstrapToken mints a short-lived bootstrap token, or a node's
// standing one, and stores its Secret in kube-system
// (kube.create-bootstrap-token). The kubelet
// authenticates with it as system:bootstrap:<id> in the groups
// system:bootstrappers and render.BootstrapTokenGroup.
func (a *Activities) CreateBootstrapToken(ctx context.Context, in kube.CreateBootstrapTokenInput) (kube.BootstrapTokenResult, error) {
	return a.createBootstrapToken(ctx, in, mintKey(ctx))
}

// createBootstrapToken mints the token of the activity key names (a
// random one when key is "").
func (a *Activities) createBootstrapToken(ctx context.Context, in kube.CreateBootstrapTokenInput, key string) (kube.BootstrapTokenResult, error) {
	if in.ForNode != "" {
		if in.TTL != "" {
			return kube.BootstrapTokenResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("ttl %s with forNode %s: a node's standing token has no expiry", in.TTL, in.ForNode), errtype.InvalidInput, nil)
		}
		if errs := validation.IsValidLabelValue(in.ForNode); len(errs) > 0 {
			return kube.BootstrapTokenResult{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("forNode %q: %s", in.ForNode, strings.Join(errs, "; ")), errtype.InvalidInput, nil)
		}
	}
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.BootstrapTokenResult{}, err
	}
	ttl, err := parseDuration(in.TTL, 15*time.Minute)
	if err != nil {
		return kube.BootstrapTokenResult{}, err
	}
	if ttl > maxTokenTTL {
		return kube.BootstrapTokenResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("ttl %s is longer than %s: a join token is for one join", ttl, maxTokenTTL), errtype.InvalidInput, nil)
	}
	tok, err := nodefiles.NewBootstrapToken(ttl, time.Now(), in.Description)
	if err != nil {
		return kube.BootstrapTokenResult{}, temporal.NewNonRetryableApplicationError(err.Error(), errtype.InvalidInput, err)
	}
	if key != "" {
		if tok, err = tok.WithID(tokenIDFor(key)); err != nil {
			return kube.BootstrapTokenResult{}, err
		}
	}
	if in.ForNode != "" {
		tok = tok.Standing()
	}
	sec := tok.Secret()
	sec.Labels = map[string]string{}
	if key != "" {
		sec.Labels[MintedByLabel] = key[:63]
	}
	if in.ForNode != "" {
		sec.Labels[NodeTokenLabel] = in.ForNode
	}
	_, err = cs.CoreV1().Secrets(sec.Namespace).Create(ctx, sec, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) && key != "" {
		err = replaceOwnToken(ctx, cs, sec, key)
	}
	if err != nil {
		return kube.BootstrapTokenResult{}, clusterError("create the bootstrap token Secret", err)
	}
	if in.ForNode != "" {
		// One standing token a node: the earlier ones go.
		if _, err := deleteNodeTokens(ctx, cs, in.ForNode, sec.Name); err != nil {
			return kube.BootstrapTokenResult{}, err
		}
	}
	res := kube.BootstrapTokenResult{TokenID: tok.ID, Token: tok.Token, Secret: sec.Namespace + "/" + sec.Name}
	if !tok.Expires.IsZero() {
		res.Expires = tok.Expires.UTC().Format(time.RFC3339)
	}
	return res, nil
}

// NodeTokenLabel on a standing bootstrap token's Secret names the Node
// it is the bootstrap credential of.
const NodeTokenLabel = "kedge.dev/bootstrap-node"

// deleteNodeTokens deletes node's standing tokens but the Secret keep.
func deleteNodeTokens(ctx context.Context, cs kubernetes.Interface, node, keep string) (bool, error) {
	list, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{NodeTokenLabel: node}).String(),
		FieldSelector: "type=" + string(bootstrapapi.SecretTypeBootstrapToken),
	})
	if err != nil {
		return false, clusterError("list the node's bootstrap tokens", err)
	}
	changed := false
	for _, s := range list.Items {
		if s.Name == keep {
			continue
		}
		err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return changed, clusterError("delete the bootstrap token Secret", err)
		}
		changed = changed || err == nil
	}
	return changed, nil
}

// DeleteBootstrapToken deletes a bootstrap token's Secret, or every
// standing token of a Node; a token already gone is not an error
// (kube.delete-bootstrap-token).
func (a *Activities) DeleteBootstrapToken(ctx context.Context, in kube.DeleteBootstrapTokenInput) (kube.ChangedResult, error) {
	switch {
	case (in.TokenID == "") == (in.ForNode == ""):
		return kube.ChangedResult{}, temporal.NewNonRetryableApplicationError("give tokenID or forNode, one of them", errtype.InvalidInput, nil)
	case in.ForNode != "" && len(validation.IsValidLabelValue(in.ForNode)) > 0:
		return kube.ChangedResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("forNode %q is not a Node name", in.ForNode), errtype.InvalidInput, nil)
	case in.TokenID != "" && !bootstraputil.IsValidBootstrapTokenID(in.TokenID):
		return kube.ChangedResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("tokenID %q is not a bootstrap token id (6 characters [a-z0-9])", in.TokenID), errtype.InvalidInput, nil)
	}
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.ChangedResult{}, err
	}
	if in.ForNode != "" {
		changed, err := deleteNodeTokens(ctx, cs, in.ForNode, "")
		return kube.ChangedResult{Changed: changed}, err
	}
	name := bootstraputil.BootstrapTokenSecretName(in.TokenID)
	err = cs.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, name, metav1.DeleteOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return kube.ChangedResult{}, nil
	case err != nil:
		return kube.ChangedResult{}, clusterError("delete the bootstrap token Secret", err)
	}
	return kube.ChangedResult{Changed: true}, nil
}

// bootstrapBindings are the ClusterRoleBindings of kubelet TLS bootstrap
// (seed 000): joining kubelets may create CSRs, the controller-manager
// approves their client certificates, and nodes may renew their own.
func bootstrapBindings() []*rbacv1.ClusterRoleBinding {
	bind := func(name, role, group string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "kedge"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
		}
	}
	return []*rbacv1.ClusterRoleBinding{
		bind("kedge:kubelet-bootstrap", "system:node-bootstrapper", nodefiles.BootstrapTokenGroup),
		bind("kedge:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", nodefiles.BootstrapTokenGroup),
		bind("kedge:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
	}
}

// BootstrapRBAC creates or updates the TLS bootstrap ClusterRoleBindings
// (kube.bootstrap-rbac).
func (a *Activities) BootstrapRBAC(ctx context.Context, in kube.BootstrapRBACInput) (kube.ChangedResult, error) {
	cs, err := a.client(ctx, in.Cluster)
	if err != nil {
		return kube.ChangedResult{}, err
	}
	var res kube.ChangedResult
	crbs := cs.RbacV1().ClusterRoleBindings()
	for _, want := range bootstrapBindings() {
		have, err := crbs.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := crbs.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return res, clusterError("create ClusterRoleBinding "+want.Name, err)
			}
			res.Changed = true
		case err != nil:
			return res, clusterError("read ClusterRoleBinding "+want.Name, err)
		case have.RoleRef != want.RoleRef:
			// The role of a binding cannot change: replace it.
			if err := crbs.Delete(ctx, want.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return res, clusterError("replace ClusterRoleBinding "+want.Name, err)
			}
			if _, err := crbs.Create(ctx, want, metav1.CreateOptions{}); err != nil {
				return res, clusterError("replace ClusterRoleBinding "+want.Name, err)
			}
			res.Changed = true
		case !sameSubjects(have.Subjects, want.Subjects):
			have.Subjects = want.Subjects
			if _, err := crbs.Update(ctx, have, metav1.UpdateOptions{}); err != nil {
				return res, clusterError("update ClusterRoleBinding "+want.Name, err)
			}
			res.Changed = true
		}
		heartbeat(ctx, want.Name)
	}
	return res, nil
}

func sameSubjects(a, b []rbacv1.Subject) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// WaitAPIServer waits until the API server answers /readyz
// (kube.wait-apiserver): after a bootstrap, or a restart of the
// control plane.
func (a *Activities) WaitAPIServer(ctx context.Context, in kube.WaitAPIServerInput) (kube.WaitAPIServerResult, error) {
	timeout, err := parseDuration(in.Timeout, 5*time.Minute)
	if err != nil {
		return kube.WaitAPIServerResult{}, err
	}
	cfg, err := a.restConfig(ctx, in.Cluster)
	if err != nil {
		return kube.WaitAPIServerResult{}, err
	}
	cfg.Timeout = 5 * time.Second
	if in.Address != "" {
		if _, _, err := net.SplitHostPort(in.Address); err != nil {
			return kube.WaitAPIServerResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("address %q is not host:port", in.Address), errtype.InvalidInput, nil)
		}
		u, err := url.Parse(cfg.Host)
		if err != nil {
			return kube.WaitAPIServerResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("kubeconfig server %q: %v", cfg.Host, err), errtype.InvalidInput, nil)
		}
		if cfg.TLSClientConfig.ServerName == "" {
			cfg.TLSClientConfig.ServerName = u.Hostname()
		}
		if in.ServerName != "" {
			if net.ParseIP(in.ServerName) == nil && len(validation.IsDNS1123Subdomain(in.ServerName)) > 0 {
				return kube.WaitAPIServerResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("serverName %q is neither a DNS name nor an IP", in.ServerName), errtype.InvalidInput, nil)
			}
			cfg.TLSClientConfig.ServerName = in.ServerName
		}
		cfg.Host = "https://" + in.Address
	} else if in.ServerName != "" {
		return kube.WaitAPIServerResult{}, temporal.NewNonRetryableApplicationError("serverName needs address", errtype.InvalidInput, nil)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return kube.WaitAPIServerResult{}, temporal.NewNonRetryableApplicationError(err.Error(), errtype.InvalidInput, err)
	}
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && strings.TrimSpace(string(body)) == "ok" {
			v, err := cs.Discovery().ServerVersion()
			switch {
			case err != nil:
				last = err.Error()
			case in.Version != "" && v.GitVersion != in.Version:
				last = fmt.Sprintf("ready, at %s (waiting for %s)", v.GitVersion, in.Version)
			default:
				return kube.WaitAPIServerResult{Version: v.GitVersion}, nil
			}
		} else if err != nil {
			last = err.Error()
		} else {
			last = strings.TrimSpace(string(body))
		}
		heartbeat(ctx, last)
		if time.Now().After(deadline) {
			return kube.WaitAPIServerResult{}, temporal.NewApplicationError(
				fmt.Sprintf("API server %s not ready after %s: %s", cfg.Host, timeout, last), errtype.NodeNotReady)
		}
		select {
		case <-ctx.Done():
			return kube.WaitAPIServerResult{}, temporal.NewCanceledError(ctx.Err().Error())
		case <-time.After(a.poll()):
		}
	}
}

// ClusterInfo reports the API server URL and CA bundle of the inventory's
// kubeconfig (kube.cluster-info), for the files a joining node is given.
// The bundle is certificates only (LoadConfig refuses anything else).
func (a *Activities) ClusterInfo(ctx context.Context, in kube.ClusterInfoInput) (kube.ClusterInfoResult, error) {
	cfg, err := a.restConfig(ctx, in.Cluster)
	if err != nil {
		return kube.ClusterInfoResult{}, err
	}
	if len(cfg.CAData) == 0 {
		return kube.ClusterInfoResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("cluster %s: kubeconfig %s names no certificate authority", in.Cluster.Name, in.Cluster.Kubeconfig), errtype.InvalidInput, nil)
	}
	return kube.ClusterInfoResult{Server: cfg.Host, CACert: string(cfg.CAData)}, nil
}

// restConfig loads the cluster's kubeconfig (LoadConfig). One refused
// for what it holds fails the action once, as CredentialRefused, with an
// audit line in the worker's log.
func (a *Activities) restConfig(ctx context.Context, c target.Kube) (*rest.Config, error) {
	if c.Kubeconfig == "" {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("cluster %s: the inventory names no kubernetes.kubeconfig", c.Name), errtype.InvalidInput, nil)
	}
	cfg, err := LoadConfig(c.Kubeconfig, c.Context)
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		return nil, a.refuse(ctx, c, err)
	case err != nil:
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("cluster %s: kubeconfig %s: %v", c.Name, c.Kubeconfig, err), errtype.InvalidInput, nil)
	}
	return cfg, nil
}

// refuse logs an audit line for a kubeconfig the worker will not load or
// save (naming the run, the action and why: never a credential) and
// fails the action once.
func (a *Activities) refuse(ctx context.Context, c target.Kube, err error) error {
	msg := fmt.Sprintf("cluster %s: %v", c.Name, err)
	attrs := []any{"audit", true, "cluster", c.Name, "kubeconfig", c.Kubeconfig}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		attrs = append(attrs, "workflowId", info.WorkflowExecution.ID, "runId", info.WorkflowExecution.RunID,
			"workflowType", info.WorkflowType.Name, "activity", info.ActivityType.Name, "attempt", info.Attempt)
	}
	attrs = append(attrs, "reason", msg)
	a.audit().Warn("kedge worker: kubeconfig refused", attrs...)
	return temporal.NewNonRetryableApplicationError(msg, errtype.CredentialRefused, nil)
}

// audit is where refusals are logged: the worker's log (not the
// activity's SDK logger), beside the credential guard's audit lines.
func (a *Activities) audit() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// clusterError classifies an API error of a cluster-wide action once.
func clusterError(op string, err error) error {
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsInvalid(err), apierrors.IsAlreadyExists(err):
		return temporal.NewNonRetryableApplicationError(op+": "+err.Error(), errtype.KubernetesAPI, err)
	case errors.Is(err, context.Canceled):
		return temporal.NewCanceledError(err.Error())
	}
	return temporal.NewApplicationError(op+": "+err.Error(), errtype.KubernetesAPI, err)
}
