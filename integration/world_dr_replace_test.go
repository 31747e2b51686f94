package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/typhoon"
	"kedge.dev/kedge/workflows"
)

// igniteTyphoonController provisions the world's spare host name as
// Matchbox would a Typhoon controller: its OS's programs and images for
// etcd and the control plane (the world's stand-ins for what the machine
// pulls), then Ignition from Typhoon's controller config rendered for the
// controllers given (Typhoon's Terraform after the operator put the new
// host in the lost one's place), and its first boot. No secret: Typhoon's
// Terraform copies those over SSH; Kedge puts them.
func igniteTyphoonController(t *testing.T, w *typhoonLab, name, flavor string, controllers []string) {
	t.Helper()
	ctx := t.Context()
	h := w.host(t, name)
	tools, err := controlplane.Tools()
	if err != nil {
		t.Fatal(err)
	}
	cpImages, err := typhoon.Images()
	if err != nil {
		t.Fatal(err)
	}
	if err := addTyphoonEtcdUser(ctx, h); err != nil {
		t.Fatal(err)
	}
	images := string(must(h.ReadFile("/etc/kedge-lab/images")))
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		prog, err := h.InstallProgram(c, typhoonProgram(tools, c))
		if err != nil {
			t.Fatal(err)
		}
		if c != "etcd" {
			images += strings.SplitN(cpImages[strings.ReplaceAll(c, "-", "_")], ":", 2)[0] + " " + prog + "\n"
		}
	}
	if err := h.WriteFile("/etc/kedge-lab/images", []byte(images), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.AddImage(testhosts.Image{Ref: typhoonEtcdImage, Entrypoint: []string{testhosts.StandInDir + "/etcd"}}); err != nil {
		t.Fatal(err)
	}
	addEtcdReleases(t, h, tools)
	var ths []typhoon.Host
	for _, c := range controllers {
		ths = append(ths, typhoon.Host{Name: c, Domain: typhoonFQDN(c), Controller: true})
	}
	if err := ignite(ctx, h, typhoon.Host{Name: name, Domain: typhoonFQDN(name), Flavor: flavor, Controller: true}, ths); err != nil {
		t.Fatal(err)
	}
	// Its first boot: etcd-member.service fails, as it does on a real
	// one, until its certificates are there.
	if err := h.Reboot(ctx); err != nil && !strings.Contains(err.Error(), "Job for etcd-member.service failed") {
		t.Fatal(err)
	}
}

// replaceInventory is the world's inventory with the spare controller
// name listed under its controllers and a backup directory on the worker.
func replaceInventory(t *testing.T, w *typhoonLab, name, backups string) string {
	t.Helper()
	h := w.host(t, name)
	var b strings.Builder
	for _, line := range strings.SplitAfter(string(must(os.ReadFile(w.inventory))), "\n") {
		if line == "workers:\n" {
			fmt.Fprintf(&b, "  - name: %s\n    nodeName: %s\n    address: %s\n    port: %d\n", name, typhoonFQDN(name), h.Address, h.Port)
		}
		b.WriteString(line)
	}
	fmt.Fprintf(&b, "backups:\n  local:\n    kind: local\n    path: %s\n", backups)
	inv := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(inv, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return inv
}

// apiThrough is a client of the world's API server on the host called
// name alone (its certificate checked for the cluster's API name).
func apiThrough(t *testing.T, w *typhoonLab, name string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", w.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host = "https://" + w.host(t, name).Address + ":6443"
	cfg.TLSClientConfig.ServerName = typhoonAPIServer
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestControllerReplaceOnTyphoonCluster replaces a Typhoon controller
// whose host is gone. The spare tyc4 is provisioned as Typhoon provisions
// a controller (Ignition, no secrets). While tyc2 still answers, the
// replace is refused as not lost, and lost=tyc9 (no member) is refused;
// with tyc2's and tyc3's etcd down it is
// refused for the quorum; neither changes etcd or the Nodes. Then tyc2's
// host is made unreachable (every process of it killed, its SSH gone) and
// controller-replace lost=tyc2 node=tyc4 snapshots etcd, removes tyc2's
// member and Node, adds tyc4's member and joins it: etcd has 3 healthy
// members (tyc1, tyc3, tyc4), tyc4's API server answers and its Node is
// Ready, also after tyc4 reboots. Last, tyc3 (a live controller) as the
// new host is refused.
func TestControllerReplaceOnTyphoonCluster(t *testing.T) {
	typhoonDRLane.join(t)
	w := typhoonDRWorld(t, "typhoon-replace")
	ctx := t.Context()
	t.Cleanup(func() {
		if t.Failed() {
			for _, u := range []string{"etcd-member.service", "kubelet.service"} {
				b, _ := w.host(t, "tyc4").ReadFile("/var/log/units/" + u + ".log")
				t.Logf("tyc4 %s log tail:\n%s", u, tail(string(b), 4000))
			}
		}
	})
	began := time.Now()
	igniteTyphoonController(t, w, "tyc4", typhoon.FCOS, []string{"tyc1", "tyc3", "tyc4"})
	t.Logf("tyc4 ignited as a Typhoon controller: %s", time.Since(began).Round(time.Millisecond))
	backups := filepath.Join(t.TempDir(), "backups")
	inv := replaceInventory(t, w, "tyc4", backups)
	three := []string{"tyc1", "tyc2", "tyc3"}
	unchanged := func(t *testing.T, what string) {
		t.Helper()
		if got := w.etcdMembersVia(t, "tyc1"); !slices.Equal(got, three) {
			t.Errorf("%s: etcd members %v", what, got)
		}
		if _, err := w.client.CoreV1().Nodes().Get(ctx, typhoonFQDN("tyc2"), metav1.GetOptions{}); err != nil {
			t.Errorf("%s: tyc2's Node: %v", what, err)
		}
		if entries, _ := os.ReadDir(backups); len(entries) != 0 {
			t.Errorf("%s: a snapshot was taken: %v", what, entries)
		}
	}

	// tyc2 is alive: not lost.
	began = time.Now()
	p, code, errOut := runWaitInv(t, "controller-replace", inv, "--set", "lost=tyc2", "--set", "node=tyc4")
	t.Logf("controller-replace of a live tyc2, refused: %s", time.Since(began).Round(time.Millisecond))
	if st := step(t, p, "etcd-check"); code == 0 || st.State != workflows.StateFailed || st.Attempts != 1 ||
		!strings.Contains(st.LastError, "tyc2 is not lost: it answers as etcd member") || !strings.Contains(st.LastError, "node-remove takes a live controller out") {
		t.Fatalf("controller-replace of a live tyc2: exit %d, etcd-check %+v: %s", code, st, errOut)
	}
	unchanged(t, "after the refusal of a live tyc2")

	// A name that is no member (a typo) would add a fourth: refused.
	p, code, errOut = runWaitInv(t, "controller-replace", inv, "--set", "lost=tyc9", "--set", "node=tyc4")
	if st := step(t, p, "lost-known"); code == 0 || st.State != workflows.StateFailed || !strings.Contains(st.LastError, "tyc9 is neither a member of etcd (its members: tyc1, tyc2, tyc3) nor a controller") {
		t.Fatalf("controller-replace lost=tyc9: exit %d, lost-known %+v: %s", code, st, errOut)
	}
	unchanged(t, "after the refusal of tyc9")

	// tyc2's and tyc3's etcd down: tyc1 alone is no quorum of tyc1 and tyc3.
	for _, h := range []string{"tyc2", "tyc3"} {
		if out, err := w.host(t, h).Exec(ctx, "systemctl", "stop", "etcd-member.service"); err != nil {
			t.Fatalf("stop etcd on %s: %v: %s", h, err, out)
		}
	}
	began = time.Now()
	p, code, errOut = runWaitInv(t, "controller-replace", inv, "--set", "lost=tyc2", "--set", "node=tyc4")
	t.Logf("controller-replace with two members down, refused: %s", time.Since(began).Round(time.Millisecond))
	if st := step(t, p, "etcd-check"); code == 0 || st.State != workflows.StateFailed ||
		!strings.Contains(st.LastError, "removing tyc2 would leave 2 members, of which 1 answer (not tyc3): a quorum needs 2") {
		t.Fatalf("controller-replace with two members down: exit %d, etcd-check %+v: %s", code, st, errOut)
	}
	for _, h := range []string{"tyc2", "tyc3"} {
		if out, err := w.host(t, h).Exec(ctx, "systemctl", "start", "etcd-member.service"); err != nil {
			t.Fatalf("start etcd on %s: %v: %s", h, err, out)
		}
	}
	eventually(t, 2*time.Minute, "etcd healthy again", func() bool {
		_, err := w.client.Discovery().RESTClient().Get().AbsPath("/readyz/etcd").DoRaw(ctx)
		return err == nil
	})
	unchanged(t, "after the refusal with two members down")

	// tyc2's host is gone: every process of it killed (etcd, the kubelet,
	// its static pods, sshd).
	if err := syscall.Kill(w.host(t, "tyc2").PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The replace itself on the inventory as bare-metal Typhoon names its
	// hosts, by DNS name, served by a worker that resolves them as a
	// site's DNS would: the new member's certificates name it.
	byName := namedInventory(t, w, inv, "typhoon-named")
	namedWorker(t, w, "typhoon-named", byName)
	began = time.Now()
	p, code, errOut = runWaitInv(t, "controller-replace", byName, "--set", "lost=tyc2", "--set", "node=tyc4")
	took := time.Since(began)
	t.Logf("controller-replace lost=tyc2 node=tyc4 on Typhoon's layout: %s", took.Round(time.Second))
	for _, s := range p.Steps {
		if s.StartedAt != nil && s.EndedAt != nil {
			t.Logf("  %-24s %s", s.ID, s.EndedAt.Sub(*s.StartedAt).Round(time.Millisecond))
		}
	}
	if code != 0 {
		t.Fatalf("controller-replace: exit %d: %s\n%+v", code, errOut, p)
	}
	if got := w.etcdMembersVia(t, "tyc1"); !slices.Equal(got, []string{"tyc1", "tyc3", "tyc4"}) {
		t.Errorf("etcd members: %v", got)
	}
	if got := w.etcdMembersVia(t, "tyc4"); !slices.Equal(got, []string{"tyc1", "tyc3", "tyc4"}) {
		t.Errorf("etcd members, as tyc4 answers: %v", got)
	}
	// tyc4 runs the release the cluster runs, whatever Typhoon's config
	// named (after TestEtcdUpgradeOnTyphoonCluster the world runs 3.6.16,
	// and a 3.5.13 member would not join).
	if got, want := w.etcdServerVersion(t, "tyc4"), w.etcdServerVersion(t, "tyc1"); got != want {
		t.Errorf("tyc4's etcd runs %s, tyc1's %s", got, want)
	}
	// What still names tyc2 on the controllers left is listed for the
	// operator: each API server's --etcd-servers and etcd's initial
	// cluster, by file and line.
	if st := step(t, p, "still-named"); st.State != workflows.StateSucceeded {
		t.Errorf("still-named: %+v", st)
	}
	named := stillNamed(t, p.WorkflowID)
	for _, h := range []string{"tyc1", "tyc3"} {
		for _, f := range []string{"/etc/kubernetes/manifests/kube-apiserver.yaml:", typhoon.EtcdEnv + ":"} {
			if !slices.ContainsFunc(named[h], func(s string) bool { return strings.HasPrefix(s, f) }) {
				t.Errorf("still-named on %s lists %q, want a line of %s", h, named[h], strings.TrimSuffix(f, ":"))
			}
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(backups, w.name, "etcd")); len(entries) != 2 {
		t.Errorf("snapshot before the replace: %v, want one snapshot and its manifest", entries)
	}
	api := apiThrough(t, w, "tyc4")
	if b, err := api.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		t.Errorf("tyc4's API server /readyz: %s (%v)", b, err)
	}
	n, err := api.CoreV1().Nodes().Get(ctx, typhoonFQDN("tyc4"), metav1.GetOptions{})
	if err != nil || !nodeIsReady(n) {
		t.Errorf("tyc4's Node through tyc4's API server: ready %v (%v)", err == nil && nodeIsReady(n), err)
	}
	if _, err := api.CoreV1().Nodes().Get(ctx, typhoonFQDN("tyc2"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("tyc2's Node after the replace: %v", err)
	}
	// Typhoon's files on tyc4: etcd's environment joins the cluster as it
	// was, the API server asks the members there are now.
	tyc4 := w.host(t, "tyc4")
	env := string(must(tyc4.ReadFile(typhoon.EtcdEnv)))
	for _, want := range []string{"ETCD_NAME=tyc4\n", "ETCD_INITIAL_CLUSTER_STATE=existing\n",
		"ETCD_INITIAL_CLUSTER=tyc1=https://tyc1.typhoon.test:2380,tyc3=https://tyc3.typhoon.test:2380,tyc4=https://tyc4.typhoon.test:2380\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("tyc4's %s does not hold %q:\n%s", typhoon.EtcdEnv, want, env)
		}
	}
	if m := string(must(tyc4.ReadFile("/etc/kubernetes/manifests/kube-apiserver.yaml"))); !strings.Contains(m,
		"--etcd-servers=https://tyc1.typhoon.test:2379,https://tyc3.typhoon.test:2379,https://tyc4.typhoon.test:2379\n") {
		t.Errorf("tyc4's kube-apiserver manifest:\n%s", m)
	}
	// Its etcd certificates name it as Typhoon's do, by its DNS name (the
	// inventory's address), loopback as the IP.
	for _, f := range []string{typhoon.EtcdServerCert, typhoon.EtcdPeerCert} {
		c := firstCert(t, must(tyc4.ReadFile(f)))
		if !slices.Contains(c.DNSNames, "tyc4.typhoon.test") || len(c.IPAddresses) != 1 || !c.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
			t.Errorf("tyc4's %s names %v and %v, want tyc4.typhoon.test and 127.0.0.1 alone", f, c.DNSNames, c.IPAddresses)
		}
	}
	if out, err := tyc4.Exec(ctx, "stat", "-c", "%U %a", typhoon.EtcdServerKey); err != nil || strings.TrimSpace(string(out)) != "etcd 500" {
		t.Errorf("tyc4's etcd server key: %q (%v)", out, err)
	}
	// A Secret written through tyc4 is read through tyc1.
	if err := writeReadThrough(ctx, api, apiThrough(t, w, "tyc1")); err != nil {
		t.Error(err)
	}

	// tyc4 comes back after a reboot as Typhoon's controllers do: its
	// etcd rejoins from its data, kubelet.path starts its kubelet.
	rebooted := time.Now()
	if err := tyc4.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "tyc4's API server answering after its reboot", func() bool {
		_, err := api.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil
	})
	t.Logf("tyc4 rebooted, its API server answering: %s", time.Since(rebooted).Round(time.Millisecond))
	eventually(t, 2*time.Minute, "tyc4's etcd member answering after its reboot", func() bool {
		_, err := tyc4.Exec(ctx, "systemctl", "is-active", "etcd-member.service")
		if err != nil {
			out, _ := tyc4.Exec(ctx, "systemctl", "status", "etcd-member.service")
			t.Logf("tyc4's etcd-member.service: %v\n%s", err, out)
		}
		return err == nil && health(ctx, tyc4.Address) == nil
	})
	t.Logf("tyc4 rebooted, its etcd member answering: %s", time.Since(rebooted).Round(time.Millisecond))
	if got := w.etcdMembersVia(t, "tyc4"); !slices.Equal(got, []string{"tyc1", "tyc3", "tyc4"}) {
		t.Errorf("etcd members after tyc4's reboot: %v", got)
	}

	// A live controller is never taken for the new host: tyc3 in tyc2's
	// place is refused before anything changes.
	p, code, errOut = runWaitInv(t, "controller-replace", inv, "--set", "lost=tyc2", "--set", "node=tyc3")
	if st := step(t, p, "not-a-member"); code == 0 || st.State != workflows.StateFailed || !strings.Contains(st.LastError, "tyc3 is a member of etcd already and its kubelet runs") {
		t.Errorf("controller-replace with tyc3, a live controller, as the new host: exit %d, not-a-member %+v: %s", code, st, errOut)
	}
	if got := w.etcdMembersVia(t, "tyc1"); !slices.Equal(got, []string{"tyc1", "tyc3", "tyc4"}) {
		t.Errorf("etcd members after the refusal of tyc3: %v", got)
	}
}

// writeReadThrough writes a Secret through one API server and reads it
// through another.
func writeReadThrough(ctx context.Context, via, other kubernetes.Interface) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kedge-replace-canary", Namespace: "default"}, StringData: map[string]string{"v": "through tyc4"}}
	if _, err := via.CoreV1().Secrets("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("write a Secret through tyc4: %w", err)
	}
	if _, err := other.CoreV1().Secrets("default").Get(ctx, s.Name, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("read tyc4's Secret through tyc1: %w", err)
	}
	return nil
}

// health is nil once something answers TLS on address:2379 (etcd's
// client port; its certificate is not checked here).
func health(ctx context.Context, address string) error {
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a liveness probe only
	c, err := d.DialContext(ctx, "tcp", address+":2379")
	if err != nil {
		return err
	}
	return c.Close()
}

// stillNamed reads controller-replace's still-named step from the run's
// history: each host's outputs.files, by the node its call was for.
func stillNamed(t *testing.T, id string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	inputs := map[int64]string{}
	for _, e := range events(t, world.client, id, "") {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == host.RunAction {
			var in host.RunInput
			if err := world.codec.DataConverter().FromPayloads(a.GetInput(), &in); err == nil && strings.Contains(in.Script, "LOST_URLS") {
				inputs[e.GetEventId()] = in.Target.Node
			}
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && inputs[a.GetScheduledEventId()] != "" {
			var res host.RunResult
			if err := world.codec.DataConverter().FromPayloads(a.GetResult(), &res); err != nil {
				t.Fatalf("decode a still-named result: %v", err)
			}
			out[inputs[a.GetScheduledEventId()]] = strings.Fields(res.Outputs["files"])
		}
	}
	return out
}
