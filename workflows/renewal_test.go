package workflows

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/runbooks/source"
)

const typhoonInventory = `apiVersion: kedge/v1
kind: Cluster
metadata: {name: tyc}
ssh: {identityFile: /k/id, knownHostsFile: /k/known_hosts}
kubernetes: {kubeconfig: /k/kubeconfig}
vault: {address: https://vault.example:8200}
controllers:
  - {name: tyc1, address: 127.0.41.1}
`

// renewalHost stands in for every action of cert-renewal-in-place on a
// Typhoon controller: it records each call ("action what") and fails the
// ones fail names.
type renewalHost struct {
	mu    sync.Mutex
	calls []string
	fail  func(call string) error
}

func (h *renewalHost) Calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

func (h *renewalHost) register(env *testsuite.TestWorkflowEnvironment) {
	str := func(in map[string]any, k string) string { s, _ := in[k].(string); return s }
	answer := map[string]func(in map[string]any) (string, map[string]any){
		"host.layout": func(map[string]any) (string, map[string]any) {
			return "", map[string]any{"kind": "typhoon-flatcar", "role": "controller",
				"files":      map[string]any{"apiserver-key": "/etc/kubernetes/pki/apiserver.key"},
				"etcd":       map[string]any{"mode": "host-unit", "unit": "etcd-member.service"},
				"staticPods": map[string]any{"kube-apiserver": "/etc/kubernetes/manifests/kube-apiserver.yaml", "kube-controller-manager": "/etc/kubernetes/manifests/kube-controller-manager.yaml", "kube-scheduler": "/etc/kubernetes/manifests/kube-scheduler.yaml"},
				"runAs":      map[string]any{"kube-apiserver": map[string]any{"user": "65534", "from": "kube-apiserver.yaml"}}}
		},
		"tls.check": func(in map[string]any) (string, map[string]any) {
			return str(in, "address"), map[string]any{"address": str(in, "address"), "notAfter": "2027-01-01T00:00:00Z", "serial": "0a", "due": in["newerThan"] == nil && in["notSerial"] == nil}
		},
		"pki.renew-in-place": func(in map[string]any) (string, map[string]any) {
			runAs, _ := in["runAs"].(map[string]any)
			api, _ := runAs["kube-apiserver"].(map[string]any)
			return "", map[string]any{"due": true, "changed": true, "etcd": true, "controlPlane": true, "backup": "/var/lib/kedge/backup/bundle-1",
				"files": []any{"/etc/kubernetes/pki/apiserver.key"}, "created": []any{},
				"readers": []any{map[string]any{"path": "/etc/kubernetes/pki/apiserver.key", "reader": "kube-apiserver", "user": api["user"]}}}
		},
		"host.check-readable": func(in map[string]any) (string, map[string]any) {
			files, _ := in["files"].([]any)
			f, _ := files[0].(map[string]any)
			return fmt.Sprintf("%s as %s", f["path"], f["user"]), map[string]any{}
		},
		"host.restore-bundle": func(in map[string]any) (string, map[string]any) { return str(in, "backup"), map[string]any{} },
		"host.systemd": func(in map[string]any) (string, map[string]any) {
			return str(in, "action") + " " + str(in, "unit"), map[string]any{}
		},
		"host.restart-static-pod": func(in map[string]any) (string, map[string]any) {
			return str(in, "manifest"), map[string]any{"restartedAt": "t1", "changed": true, "backup": "/var/lib/kedge/backup/x"}
		},
		"kube.wait-static-pod": func(in map[string]any) (string, map[string]any) {
			return fmt.Sprintf("%s %v", str(in, "pod"), in["timeout"]), map[string]any{"ready": true}
		},
		"kube.wait-apiserver": func(in map[string]any) (string, map[string]any) { return str(in, "timeout"), map[string]any{} },
	}
	for name, f := range answer {
		env.RegisterActivityWithOptions(func(_ context.Context, in map[string]any) (map[string]any, error) {
			what, out := f(in)
			call := strings.TrimSpace(name + " " + what)
			h.mu.Lock()
			h.calls = append(h.calls, call)
			h.mu.Unlock()
			if h.fail != nil {
				if err := h.fail(call); err != nil {
					return nil, err
				}
			}
			return out, nil
		}, activity.RegisterOptions{Name: name})
	}
}

func inPlaceInput(t *testing.T) RunbookInput {
	t.Helper()
	docs, err := source.Parse("inventory.yaml", []byte(typhoonInventory))
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := inventory.Decode(docs[0])
	if err != nil {
		t.Fatal(err)
	}
	l, err := (&runbooks.Library{Builtin: runbooks.Builtin}).Load("cert-renewal-in-place", cluster)
	if err != nil {
		t.Fatal(err)
	}
	params, err := runbooks.ResolveParams(l.Runbook, map[string]any{"node": "tyc1", "issuer": "i1", "caCert": "CA", "etcdIssuer": "i2", "etcdCACert": "ETCD CA"}, cluster)
	if err != nil {
		t.Fatal(err)
	}
	return Admit(RunbookInput{Runbook: *l.Runbook, Params: params, Cluster: *cluster}, time.Now())
}

func renewalEnv(t *testing.T, fail func(string) error) (*testsuite.TestWorkflowEnvironment, *renewalHost) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	asOnAWorker(env)
	Register(env)
	registerAdmit(env)
	h := &renewalHost{fail: fail}
	h.register(env)
	env.ExecuteWorkflow(Runbook, inPlaceInput(t))
	return env, h
}

// A renewal that kube-apiserver (nobody) could not read fails before
// anything restarts, and the undo puts the old files back.
func TestInPlaceRenewalChecksTheReadersBeforeAnyRestart(t *testing.T) {
	env, h := renewalEnv(t, func(call string) error {
		if strings.HasPrefix(call, "host.check-readable") {
			return temporal.NewNonRetryableApplicationError("kube-apiserver (uid 65534 gid 65534) cannot read /etc/kubernetes/pki/apiserver.key (root:root 600)", "Unreadable", nil)
		}
		return nil
	})
	if _, err := result(t, env); err == nil || !strings.Contains(err.Error(), "failed at step readable") {
		t.Fatalf("want a failure at readable, got %v", err)
	}
	calls := h.Calls()
	if !slices.Contains(calls, "host.check-readable /etc/kubernetes/pki/apiserver.key as 65534") {
		t.Errorf("the read check was not run as the API server's user: %v", calls)
	}
	for _, c := range calls {
		if strings.HasPrefix(c, "host.systemd") || strings.HasPrefix(c, "host.restart-static-pod") || strings.HasPrefix(c, "kube.wait") {
			t.Errorf("%s after a failed read check (calls %v)", c, calls)
		}
	}
	if last := calls[len(calls)-1]; last != "host.restore-bundle /var/lib/kedge/backup/bundle-1" {
		t.Errorf("last call %q, want the bundle restored (calls %v)", last, calls)
	}
}

// An API server that does not come back after its restart fails its one
// wait (a few minutes at most, not retried against it), and the undo restores the files and
// restarts every restarted component onto them, the bundle's own undo
// last.
func TestInPlaceRenewalUndoesAComponentThatDoesNotComeBack(t *testing.T) {
	env, h := renewalEnv(t, func(call string) error {
		if strings.HasPrefix(call, "kube.wait-static-pod kube-apiserver") {
			// What the wait says when its time is up (retryable): a
			// crash loop is said sooner, not retryable.
			return temporal.NewApplicationError("static pod kube-system/kube-apiserver-tyc1 not ready after 3m0s: container kube-apiserver not ready", "NodeNotReady")
		}
		return nil
	})
	if _, err := result(t, env); err == nil || !strings.Contains(err.Error(), "failed at step apiserver-restarted") {
		t.Fatalf("want a failure at apiserver-restarted, got %v", err)
	}
	calls := h.Calls()
	apiWaits := 0
	for _, c := range calls {
		if strings.HasPrefix(c, "kube.wait-static-pod") && !strings.HasSuffix(c, " 3m") {
			t.Errorf("%s: want a 3m timeout", c)
		}
		if strings.HasPrefix(c, "kube.wait-static-pod kube-apiserver") {
			apiWaits++
		}
	}
	if apiWaits != 1 {
		t.Errorf("the API server that did not come back was waited for %d times, want once: %v", apiWaits, calls)
	}
	// The undo starts at the first restore after the failed wait (a
	// sibling restart may finish in between).
	failed := slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, "kube.wait-static-pod kube-apiserver") })
	undo := calls[failed+1:]
	undo = undo[slices.Index(undo, "host.restore-bundle /var/lib/kedge/backup/bundle-1"):]
	restore := "host.restore-bundle /var/lib/kedge/backup/bundle-1"
	for _, want := range [][2]string{
		{restore, "host.restart-static-pod /etc/kubernetes/manifests/kube-apiserver.yaml"},
		{restore, "host.restart-static-pod /etc/kubernetes/manifests/kube-controller-manager.yaml"},
		{restore, "host.restart-static-pod /etc/kubernetes/manifests/kube-scheduler.yaml"},
		{restore, "host.systemd restart etcd-member.service"},
	} {
		i := slices.Index(undo, want[1])
		if i < 1 || undo[i-1] != want[0] {
			t.Errorf("undo: %q not right after %q: %v", want[1], want[0], undo)
		}
	}
	if undo[len(undo)-1] != restore {
		t.Errorf("undo ends with %q, want the bundle restored: %v", undo[len(undo)-1], undo)
	}
}
