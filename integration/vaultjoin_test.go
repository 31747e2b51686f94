package integration

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/vaultlab"
	"kedge.dev/kedge/workflows"
)

// outage is a TCP path to a server that can be cut and restored: while
// down, connections are refused and those open are closed, as when a
// server restarts or its load balancer loses it. The server behind keeps
// its state (a dev-mode Vault would lose its CAs on a real restart).
type outage struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newOutage(t *testing.T, target string) *outage {
	t.Helper()
	o := &outage{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.addr = ln.Addr().String()
	o.serve(ln)
	t.Cleanup(func() { o.down(); o.wg.Wait() })
	return o
}

func (o *outage) serve(ln net.Listener) {
	o.mu.Lock()
	o.ln = ln
	o.mu.Unlock()
	o.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			o.wg.Go(func() { o.pipe(c) })
		}
	})
}

func (o *outage) pipe(c net.Conn) {
	up, err := net.Dial("tcp", o.target)
	if err != nil {
		_ = c.Close()
		return
	}
	o.mu.Lock()
	if o.ln == nil {
		o.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	o.conns[c], o.conns[up] = struct{}{}, struct{}{}
	o.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = up.Close()
	<-done
	o.mu.Lock()
	delete(o.conns, c)
	delete(o.conns, up)
	o.mu.Unlock()
}

// down refuses new connections and closes the open ones.
func (o *outage) down() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ln != nil {
		_ = o.ln.Close()
		o.ln = nil
	}
	for c := range o.conns {
		_ = c.Close()
	}
}

// up listens again on the same address.
func (o *outage) up(t *testing.T) {
	t.Helper()
	var ln net.Listener
	var err error
	// The port was ours a moment ago; the kernel may hold it briefly.
	for range 50 {
		if ln, err = net.Listen("tcp", o.addr); err == nil {
			o.serve(ln)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("listen again on %s: %v", o.addr, err)
}

// Vault goes away in the middle of a join whose SSH logins are Vault
// certificates, while the worker running the join is replaced: the new
// worker has no certificate yet, so its next SSH step fails on Vault and
// is retried (not failed as an authentication error), the join completes
// once Vault answers again, and the join's bootstrap token is revoked.
func TestNodeJoinRidesOutVaultDown(t *testing.T) {
	mainLane.join(t)
	cp, _ := kubeLab(t)
	v, tokenFile := labVault(t)
	u, err := url.Parse(v.Address)
	if err != nil {
		t.Fatal(err)
	}
	vaultPath := newOutage(t, u.Host)

	l := startLabOf(t, "127.0.44.", testhosts.Options{Names: []string{"vjoin-1"}, TrustedUserCAKey: v.SSHCAPublicKey})
	h := l.Hosts[0]
	// Only a certificate from Vault logs in: no authorized keys.
	for _, p := range []string{"/root/.ssh/authorized_keys", "/home/" + testhosts.User + "/.ssh/authorized_keys"} {
		if err := h.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.WriteFile("/etc/kedge-lab/images", []byte("quay.io/poseidon/kubelet /usr/local/sbin/kubelet-sim\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inv := writeInventory(t, fmt.Sprintf(`apiVersion: kedge/v1
kind: Cluster
metadata: {name: vjoin}
ssh:
  user: core
  become: sudo
  knownHostsFile: %s
  vaultSigner: {role: %s}
vault:
  address: http://%s
  tokenFile: %s
kubernetes:
  kubeconfig: %s
  kubeletImage: %s
  clusterDNS: [10.96.0.10]
workers:
  - name: %s
    address: %s
`, l.KnownHostsFile, vaultlab.SSHRole, vaultPath.addr, tokenFile, cp.AdminKubeconfig, joinImage, h.Name, h.Address))
	before := bootstrapTokens(t, cp)

	const queue = "vault-join"
	first := startWorker(t, queue, inv)
	id := startRunInv(t, "node-join", inv, "--set", "node="+h.Name, "--task-queue", queue)

	// Mid-join: the first worker has logged in (its certificate is
	// cached) and the join goes on to the host steps that follow.
	stepState := func(p workflows.Progress, step string) string {
		for _, s := range p.Steps {
			if s.ID == step {
				return s.State
			}
		}
		return ""
	}
	eventually(t, 2*time.Minute, "preflight to pass", func() bool {
		p, err := queryProgress(id)
		return err == nil && stepState(p, "preflight") == workflows.StateSucceeded
	})
	vaultPath.down()
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	startWorker(t, queue, inv)

	// Vault stays away until the new worker has hit it.
	var hit workflows.StepProgress
	eventually(t, 3*time.Minute, "a step to fail on Vault", func() bool {
		p, err := queryProgress(id)
		if err != nil {
			return false
		}
		for _, s := range p.Steps {
			if strings.Contains(s.LastError, "sign a login certificate") {
				hit = s
				return true
			}
		}
		return p.State != workflows.StateRunning
	})
	if hit.ID == "" {
		p, _ := queryProgress(id)
		t.Fatalf("the join never asked Vault while it was down: %+v", p)
	}
	vaultPath.up(t)

	p, code := watch(t, id)
	// Whatever became of the join, its token is gone.
	if after := bootstrapTokens(t, cp); !slices.Equal(after, before) {
		t.Errorf("bootstrap tokens before %v, after the join %v: the join's token was not revoked", before, after)
	}
	if code != 0 || p.State != workflows.StateSucceeded {
		t.Fatalf("node-join did not complete after Vault came back: exit %d %+v", code, p)
	}
	s := step(t, p, hit.ID)
	if s.Attempts < 2 || !strings.Contains(s.LastError, "sign a login certificate") || strings.Contains(s.LastError, "AuthFailed") {
		t.Errorf("step %s: want a retried Vault failure, not an authentication failure: %+v", hit.ID, s)
	}
	n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), h.Name, metav1.GetOptions{})
	if err != nil || !nodeIsReady(n) {
		t.Errorf("node %s after the join: %v", h.Name, err)
	}
	if r := step(t, p, "revoke-token"); r.State != workflows.StateSucceeded {
		t.Errorf("revoke-token %+v", r)
	}
}
