package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/render"
	"kedge.dev/kedge/activities/nodefiles"
	"kedge.dev/kedge/chatops"
	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/typhoon"
	"kedge.dev/kedge/slackmsg"
	"kedge.dev/kedge/workflows"
)

// The Typhoon world upgraded to the next minor with the real binaries of
// both: a skipped minor, started by a signed webhook, refused before
// anything changes; then cluster-upgrade to v1.36.3 started from chat
// (`/kedge upgrade typhoon-world v1.36.3`: the plan posted in the channel, nothing
// changed until Continue is clicked): every API server, then every controller
// manager and scheduler, one controller at a time, then every kubelet.
// Each controller's manifests differ from Typhoon's in their image tags
// alone (what the plan rendered), each controller runs the v1.36
// binaries, /version answers v1.36.3 on every API server, every Node's
// kubelet reports v1.36.3, some API server answered throughout (save
// moments shorter than one controller's restart) and none was down
// longer than a minute, and the Deployments from before still run.
func TestClusterUpgradeOnTyphoonCluster(t *testing.T) {
	typhoonLane.join(t)
	typhoonWorld(t)
	adoptTyphoon(t)
	ctx := t.Context()
	cs := typhoonBuilt.client
	next, err := controlplane.NextTools()
	if err != nil {
		t.Fatal(err)
	}
	version := controlplane.NextVersion
	controllers := []*testhosts.Host{typhoonHost(t, "tyc1"), typhoonHost(t, "tyc2"), typhoonHost(t, "tyc3")}
	components := []string{kube.APIServer, kube.ControllerManager, kube.Scheduler}

	// The v1.36 images, as a registry would serve them: each controller's
	// kubelet runs the real v1.36 binary for an image of that tag.
	for _, h := range controllers {
		images := string(must(h.ReadFile("/etc/kedge-lab/images")))
		var lines strings.Builder
		for _, c := range components {
			prog, err := h.InstallProgram(c+"-"+version, filepath.Join(next, c))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&lines, "registry.k8s.io/%s:%s %s\n", c, version, prog)
		}
		// First: the kubelet takes the first line an image starts with.
		if err := h.WriteFile("/etc/kedge-lab/images", []byte(lines.String()+images), 0o644); err != nil {
			t.Fatal(err)
		}
		// In containerd's store, as a pull would leave them; tyc2's
		// scheduler only after an upgrade that needed it was refused.
		for _, c := range components {
			if h.Name == "tyc2" && c == kube.Scheduler {
				continue
			}
			if err := h.AddCRIImage("registry.k8s.io/" + c + ":" + version); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := map[string]string{}
	for _, h := range controllers {
		for _, c := range components {
			before[h.Name+":"+c] = string(must(h.ReadFile(typhoon.ManifestsDir + "/" + c + ".yaml")))
		}
	}
	deployments, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil || len(deployments.Items) == 0 {
		t.Fatalf("the Deployments before: %v (%d)", err, len(deployments.Items))
	}

	// The inventory names every Node the cluster has (the lane's earlier
	// tests join workers with inventories of their own), and a snapshot
	// destination for the upgrade's first snapshot.
	base := string(must(os.ReadFile(typhoonBuilt.inventory)))
	var extra strings.Builder
	for _, n := range typhoonNodesNow(t, cs) {
		if !strings.Contains(base, "nodeName: "+n+"\n") {
			h := typhoonHost(t, strings.TrimSuffix(n, "."+typhoonDomain))
			fmt.Fprintf(&extra, "  - name: %s\n    nodeName: %s\n    address: %s\n    port: %d\n", h.Name, n, h.Address, h.Port)
		}
	}
	backupDir := t.TempDir()
	backups := fmt.Sprintf("backups:\n  local:\n    kind: local\n    path: %s\n", backupDir)
	inv := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(inv, []byte(base+extra.String()+backups), 0o600); err != nil {
		t.Fatal(err)
	}

	// An inventory that leaves out a Node (tyw2): its kubelet would stay
	// on the old release. Refused before anything changes.
	short := filepath.Join(t.TempDir(), "inventory.yaml")
	if err := os.WriteFile(short, []byte(withoutHost(t, base, "tyw2")+extra.String()+backups), 0o600); err != nil {
		t.Fatal(err)
	}
	p, code, errOut := runWaitInv(t, "cluster-upgrade", short, "--set", "version="+version, "--set", "destination=local")
	if code == 0 || !strings.Contains(p.Error, "the cluster has Nodes the list does not name: "+typhoonFQDN("tyw2")) {
		t.Fatalf("an upgrade leaving tyw2 out: exit %d, %s: %s %s", code, p.State, p.Error, errOut)
	}
	if s := step(t, p, "snapshot"); s.State != "not-run" {
		t.Errorf("the snapshot of the refused upgrade: %s", s.State)
	}

	// The release's scheduler image missing on tyc2, and no registry to
	// pull it from: the upgrade stops before its snapshot.
	p, code, errOut = runWaitInv(t, "cluster-upgrade", inv, "--set", "version="+version, "--set", "destination=local", "--set", "approvePlan=false")
	if want := "pulling registry.k8s.io/kube-scheduler:" + version + " into containerd on tyc2 failed"; code == 0 || !strings.Contains(p.Error, want) {
		t.Fatalf("an upgrade whose image cannot be pulled on tyc2: exit %d, %s: %s %s", code, p.State, p.Error, errOut)
	}
	if s := step(t, p, "snapshot"); s.State != "not-run" {
		t.Errorf("the snapshot of the upgrade whose image was not there: %s", s.State)
	}
	if err := typhoonHost(t, "tyc2").AddCRIImage("registry.k8s.io/kube-scheduler:" + version); err != nil {
		t.Fatal(err)
	}

	// A skipped minor, from a CI system's signed webhook: refused at the
	// plan, nothing changed.
	c := startChatFor(t, typhoonCluster, inv, t.TempDir())
	body := `{"runbook":"cluster-upgrade","inventory":"` + typhoonCluster + `","params":{"version":"v1.37.2","destination":"local"}}`
	at := time.Now()
	h := http.Header{}
	h.Set(chatops.HeaderKey, "ci")
	h.Set(chatops.HeaderSig, chatops.SignHook([]byte(itHookKey), at, "upgrade-1", []byte(body)))
	h.Set(chatops.HeaderReq, "upgrade-1")
	var hook chatops.HookResponse
	if r := c.send(t, request{path: "/hooks/run", ctype: "application/json", body: []byte(body), header: h}); r.status != 201 || json.Unmarshal([]byte(r.raw), &hook) != nil {
		t.Fatalf("POST /hooks/run cluster-upgrade: %d %s", r.status, r.raw)
	}
	if err := waitClosed(t, hook.WorkflowID, 3*time.Minute); err == nil || !strings.Contains(err.Error(), "would skip 1 minor") || !strings.Contains(err.Error(), "UpgradeRefused") {
		t.Fatalf("an upgrade that skips a minor: %v", err)
	}
	p, _ = watch(t, hook.WorkflowID)
	for _, id := range []string{"nodes-ready", "snapshot", "first-apiserver"} {
		if s := step(t, p, id); s.State != "not-run" {
			t.Errorf("step %s of the refused upgrade: %s", id, s.State)
		}
	}
	for _, h := range controllers {
		for _, c := range components {
			if got := string(must(h.ReadFile(typhoon.ManifestsDir + "/" + c + ".yaml"))); got != before[h.Name+":"+c] {
				t.Errorf("%s's %s changed by a refused upgrade", h.Name, c)
			}
		}
	}

	// What a run would change, without one: `kedge plan --live` reads
	// the hosts, etcd and the API up to the plan's gate and prints its
	// prompt, the summary and every manifest's diff; nothing changes.
	out, errOut, code := kedge(t, "plan", "cluster-upgrade", "--inventory", inv, "--set", "version="+version, "--set", "destination=local", "--live")
	if code != 0 {
		t.Fatalf("kedge plan cluster-upgrade --live: exit %d: %s\n%s", code, errOut, out)
	}
	for _, want := range []string{"What a run would do (approve-plan's prompt; nothing has changed):",
		"Upgrade " + typhoonCluster + " to " + version, "etcd: 3.5.13"} {
		if !strings.Contains(out, want) {
			t.Errorf("kedge plan --live does not say %q:\n%s", want, out)
		}
	}
	// Each kubelet's KUBELET_IMAGE drop-in as the swap will write it.
	dropIn := regexp.MustCompile(`(?m)^--- tyw1:/etc/systemd/system/kubelet\.service\.d/[0-9a-z-]+\.conf\n(?:.*\n)*?\+Environment="KUBELET_IMAGE=quay\.io/poseidon/kubelet:` + regexp.QuoteMeta(version) + `"$`)
	if !dropIn.MatchString(out) {
		t.Errorf("kedge plan --live shows no change of tyw1's kubelet drop-in to %s:\n%s", version, out)
	}
	for _, h := range controllers {
		for _, c := range components {
			header := fmt.Sprintf("--- %s:%s/%s.yaml", h.Name, typhoon.ManifestsDir, c)
			added := regexp.MustCompile(`(?m)^\+.*image: \S+/` + c + `:` + regexp.QuoteMeta(version) + `$`)
			// The file's own diff: from its header to the next one.
			diff, _, _ := strings.Cut(after(out, header), "\n--- ")
			if !strings.Contains(out, header) || !added.MatchString(diff) {
				t.Errorf("kedge plan --live shows no diff of %s on %s to %s", c, h.Name, version)
			}
			if got := string(must(h.ReadFile(typhoon.ManifestsDir + "/" + c + ".yaml"))); got != before[h.Name+":"+c] {
				t.Errorf("%s's %s changed by kedge plan --live", h.Name, c)
			}
		}
	}

	// The upgrade, with a client asking every API server all along.
	var addrs []string
	for _, h := range controllers {
		addrs = append(addrs, h.Address+":6443")
	}
	// Started from chat: the plan is posted with its buttons before
	// anything changes; a click on Continue starts the upgrade.
	poller := startAPIPoller(t, typhoonBuilt.kubeconfig, addrs)
	began := time.Now()
	r := c.slash(t, "U0SRE", "upgrade "+typhoonCluster+" "+version+" destination=local approve-first=false", "trigger-upgrade")
	if r.outcome != "started" {
		t.Fatalf("/kedge upgrade: %s: %s", r.outcome, r.raw)
	}
	id := startedIDOn(t, r, "cluster-upgrade", typhoonCluster)
	plan := c.recv.wait(t, 3*time.Minute, "the plan posted with its buttons", func(p posted) bool {
		return len(p.Blocks) == 2 && strings.Contains(p.Text, "approve-plan")
	})
	for _, h := range controllers {
		for _, comp := range components {
			if line := fmt.Sprintf("%s %s: ", h.Name, comp); !strings.Contains(plan.Text, line) || !strings.Contains(plan.Text, comp+":"+version) {
				t.Errorf("the plan in the channel has no line %q to %s:\n%s", line, version, plan.Text)
			}
		}
	}
	// Typhoon's CoreDNS to the release v1.36 ships (its Corefile needs no
	// change), as kubeadm's table of that release says.
	if want := "coredns: registry.k8s.io/coredns/coredns:v1.13.1 → registry.k8s.io/coredns/coredns:v1.14.2\n"; !strings.Contains(plan.Text, want) {
		t.Errorf("the plan in the channel does not say %q:\n%s", want, plan.Text)
	}
	// Typhoon's etcd (quay.io/coreos/etcd:v3.5.13), as its members say.
	if !strings.Contains(plan.Text, "etcd: "+strings.TrimPrefix(typhoonEtcdBinary, "etcd-v")+" on 3 member(s), kept") {
		t.Errorf("the plan in the channel does not say etcd's release:\n%s", plan.Text)
	}
	p, _ = progressOf(t, id)
	if s := step(t, p, "snapshot"); s.State != workflows.StatePending {
		t.Errorf("the snapshot while the plan waits: %s", s.State)
	}
	buttons := buttonsOf(t, plan, 2)
	if buttons[0].ActionID != slackmsg.ActionContinue {
		t.Fatalf("the plan's buttons: %+v", buttons)
	}
	if click := c.send(t, c.clickRequest(t, "U0SRE", slackmsg.ActionContinue, buttons[0].Value, "1700000100.1", time.Now(), itSigningSecret)); click.status != 200 {
		t.Fatalf("Continue on the plan: %d %s", click.status, click.raw)
	}
	runErr := waitClosed(t, id, 20*time.Minute)
	took := time.Since(began)
	longest, none, lastErr := poller.report()
	p, _ = watch(t, id)
	if runErr != nil {
		t.Fatalf("cluster-upgrade: %v\n%+v", runErr, p)
	}
	c.recv.wait(t, time.Minute, "the result posted", resultPost("/commands/trigger-upgrade"))
	// The snapshot taken first is the run's output, to restore from: its
	// key names a file of the destination.
	snap, _ := p.Outputs["snapshot"].(string)
	if _, err := os.Stat(filepath.Join(backupDir, filepath.FromSlash(snap))); snap == "" || err != nil ||
		p.Outputs["destination"] != "local" || len(fmt.Sprint(p.Outputs["snapshotSHA256"])) != 64 {
		t.Errorf("the upgrade's outputs %v (%v): want the snapshot's key in the destination and its sha256", p.Outputs, err)
	}
	var times []string
	for _, s := range p.Steps {
		if s.StartedAt != nil && s.EndedAt != nil {
			times = append(times, fmt.Sprintf("%s %s", s.ID, s.EndedAt.Sub(*s.StartedAt).Round(time.Second)))
		}
	}
	t.Logf("cluster-upgrade of 3 controllers + %d nodes to %s: %s; %s", len(typhoonNodesNow(t, cs)), version, took.Round(time.Second), strings.Join(times, ", "))
	t.Logf("API servers' longest outage: %v (none answered for %s at most); last errors %v", longest, none, lastErr)
	// Through the inventory's API address (any API server), a client sees
	// no failure window as long as one controller's restart: the shortest
	// outage of one API server. (Under load a moment where every API
	// server fails a poll, /readyz's etcd check timing out on one while
	// another restarts, was seen: 21 ms.)
	restart := time.Duration(0)
	for _, d := range longest {
		if restart == 0 || d < restart {
			restart = d
		}
	}
	if none >= restart {
		t.Errorf("no API server answered for %s, as long as one controller's restart (%s)", none, restart)
	}
	for a, d := range longest {
		if d > time.Minute {
			t.Errorf("%s was down %s: longer than one restart", a, d)
		}
	}

	// What the plan rendered is what each controller has: Typhoon's
	// manifests with the tag changed and nothing else.
	for _, h := range controllers {
		for _, c := range components {
			want, err := nodefiles.SetImage(render.SetImageInput{Manifest: before[h.Name+":"+c], Container: c, Tag: version})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(must(h.ReadFile(typhoon.ManifestsDir + "/" + c + ".yaml"))); got != want.Content {
				t.Errorf("%s's %s after the upgrade is not Typhoon's with the tag %s:\n%s", h.Name, c, version, got)
			}
		}
		// The processes: the v1.36 binaries.
		running := hostCommands(t, h)
		for _, c := range components {
			if !slices.ContainsFunc(running, func(cmd string) bool { return strings.HasPrefix(cmd, testhosts.StandInDir+"/"+c+"-"+version+" ") }) {
				t.Errorf("%s runs no %s %s: %q", h.Name, c, version, running)
			}
		}
		if v := apiServerVersion(t, h.Address+":6443"); v != version {
			t.Errorf("%s's API server answers /version %s", h.Name, v)
		}
	}
	for _, n := range must(cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})).Items {
		if v := n.Status.NodeInfo.KubeletVersion; v != version {
			t.Errorf("Node %s's kubelet is %s", n.Name, v)
		}
	}
	// CoreDNS rolled out on its new release.
	if dns := must(cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})); dns.Spec.Template.Spec.Containers[0].Image != "registry.k8s.io/coredns/coredns:v1.14.2" {
		t.Errorf("CoreDNS after the upgrade: %s", dns.Spec.Template.Spec.Containers[0].Image)
	}
	if pending := componentsPending(ctx, cs, false); len(pending) > 0 {
		t.Errorf("Typhoon's components after the upgrade: %q", pending)
	}
	for _, d := range deployments.Items {
		now, err := cs.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil || now.UID != d.UID || now.Status.AvailableReplicas < 1 {
			t.Errorf("Deployment %s/%s after the upgrade: %v", d.Namespace, d.Name, err)
		}
	}
}

// hostCommands are the command lines of the processes in h's network
// namespace (the test hosts share the machine's process table).
func hostCommands(t *testing.T, h *testhosts.Host) []string {
	t.Helper()
	out, err := h.Exec(t.Context(), "sh", "-c",
		`self=$(readlink /proc/self/ns/net); for p in /proc/[0-9]*; do [ "$(readlink $p/ns/net 2>/dev/null)" = "$self" ] && tr '\0' ' ' <$p/cmdline 2>/dev/null && echo; done; true`)
	if err != nil {
		t.Fatalf("%s: processes: %v", h.Name, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// apiServerVersion is what one API server answers /version.
func apiServerVersion(t *testing.T, addr string) string {
	t.Helper()
	cs := kubeClientAt(t, typhoonBuilt.kubeconfig, addr)
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(t.Context())
	if err != nil {
		return err.Error()
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return err.Error()
	}
	return v.GitVersion
}

// kubeClientAt is a client of one API server of the Typhoon world, its
// certificate checked for the cluster's API name.
func kubeClientAt(t *testing.T, kubeconfig, addr string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host, cfg.TLSClientConfig.ServerName, cfg.Timeout = "https://"+addr, typhoonAPIServer, 5*time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// withoutHost is an inventory without the host called name.
func withoutHost(t *testing.T, inv, name string) string {
	t.Helper()
	var b strings.Builder
	skip, found := false, false
	for _, line := range strings.SplitAfter(inv, "\n") {
		switch {
		case line == "  - name: "+name+"\n":
			skip, found = true, true
			continue
		case strings.HasPrefix(line, "  - ") || !strings.HasPrefix(line, " "):
			skip = false
		}
		if !skip {
			b.WriteString(line)
		}
	}
	if !found {
		t.Fatalf("no host %s in the inventory:\n%s", name, inv)
	}
	return b.String()
}

// after is what follows the first sep in s ("" when s has none).
func after(s, sep string) string {
	if _, rest, ok := strings.Cut(s, sep); ok {
		return rest
	}
	return ""
}
