package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/render"
	"kedge.dev/kedge/activities/nodefiles"
	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/images"
	"kedge.dev/kedge/integration/realnode"
	"kedge.dev/kedge/workflows"
)

// cluster-upgrade on Kedge's own layout with real kubelets: the shared
// real cluster (1 controller, 2 workers; its CAs rotated when the lane's
// rotation ran first) upgraded from v1.35.4 to the next minor with the
// real v1.36 binaries, as images the kubelets run.
//
//   - An inventory still naming v1.35.4 is refused at the plan: Kedge's
//     own manifests are rendered from it.
//   - The plan asked about before anything changes, approved with
//     `kedge approve`; then a release whose API server cannot start (its
//     image runs the real v1.36 binary with a flag it does not know): the
//     first controller's
//     manifest is put back and its old API server waited for, the run
//     pauses; abort leaves every manifest and kubelet as it was.
//   - The upgrade, its worker killed once the API server answers the
//     release and a new one started: each component's runbook ran once;
//     the API server, controller manager and scheduler run
//     the v1.36 binaries (asked of the running processes), /version
//     answers the release, every Node's kubelet reports it, kube-proxy
//     runs the release's binary on every node, each manifest
//     is the one before with the tag changed and nothing else (what the
//     plan rendered), and a Deployment from before still has its pods
//     Ready, which ask the API who they are through the Service.
func TestRealKubeletClusterUpgrade(t *testing.T) {
	realLane.join(t)
	tools := realKubeletTools(t)
	next, err := controlplane.NextTools()
	if err != nil {
		t.Fatal(err)
	}
	version := controlplane.NextVersion
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	// The lane's last test: it closes the shared cluster.
	rc := sharedRealCluster(t, tools)
	defer closeSharedRealCluster(t)
	ctl := rc.ctl
	// A client from the kubeconfig as it is now: the lane's CA rotation
	// replaced the CA the cluster's first client trusted.
	cs, err := kubeClientOf(rc.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}

	// The release's images on every node: the control plane's in
	// containerd, the kubelet's in the container stand-in's store (the
	// old one kept: the running kubelets are of it).
	start := time.Now()
	cp, err := images.NextControlPlane(next, version)
	if err != nil {
		t.Fatal(err)
	}
	good, err := images.Build(cp...)
	if err != nil {
		t.Fatal(err)
	}
	badImage, err := images.BadFlag(ctx, next, version, kube.APIServer)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := images.Build(badImage)
	if err != nil {
		t.Fatal(err)
	}
	oldBin, err := images.KubeletBinary(ctx, tools, images.KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	client := apiClientImage(ctx, t, tools)
	for _, n := range rc.nodes {
		if err := realnode.SetKubeletImages(n.host,
			realnode.KubeletImage{Ref: images.KubeletRef(images.KubeVersion), Binary: oldBin},
			realnode.KubeletImage{Ref: images.KubeletRef(version), Binary: filepath.Join(next, "kubelet")}); err != nil {
			t.Fatal(err)
		}
		// The release's control plane and kube-proxy everywhere: importing
		// them all is as quick.
		if err := n.node.Import(ctx, append([]string{client}, good...)...); err != nil {
			t.Fatal(err)
		}
	}
	// The API server's image that cannot start last: it takes the tag.
	if err := ctl.node.Import(ctx, bad...); err != nil {
		t.Fatal(err)
	}
	t.Logf("the %s images on the nodes: %s", version, time.Since(start).Round(time.Millisecond))

	if _, err := cs.AppsV1().Deployments("default").Create(ctx, apiClientDeployment("upgrade-client", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := waitDeploymentReady(t, cs, "upgrade-client", 3*time.Minute)

	components := []string{kube.APIServer, kube.ControllerManager, kube.Scheduler}
	manifests := func() map[string]string {
		out := map[string]string{}
		for _, c := range components {
			out[c] = ctl.file(t, "/etc/kubernetes/manifests/"+c+".yaml")
		}
		return out
	}
	before := manifests()
	backups := fmt.Sprintf("backups:\n  local:\n    kind: local\n    path: %s\n", t.TempDir())
	base := string(must(os.ReadFile(rc.inventory)))
	stale := writeInventory(t, base+backups)
	inv := writeInventory(t, strings.Replace(base, "kubernetes:\n", "kubernetes:\n  version: "+version+"\n", 1)+backups)

	// The inventory still names v1.35.4: refused before anything changes.
	p, code, errOut := runWaitInv(t, "cluster-upgrade", stale, "--set", "version="+version, "--set", "destination=local")
	if code == 0 || !strings.Contains(p.Error, "UpgradeRefused") || !strings.Contains(p.Error, "kubernetes.version") {
		t.Fatalf("an upgrade the inventory does not name: exit %d, %s: %s %s", code, p.State, p.Error, errOut)
	}
	if s := step(t, p, "snapshot"); s.State != "not-run" {
		t.Errorf("the snapshot of the refused upgrade: %s", s.State)
	}

	// A worker whose containerd lacks the release's kube-proxy, and no
	// registry to pull it from (the test world has none): the real ctr's
	// pull fails and the upgrade stops before its snapshot.
	w := rc.nodes[1]
	proxy := images.ImageRepository + "/" + kube.KubeProxy + ":" + version
	if out, err := w.node.Command(ctx, "ctr", "-a", realnode.ContainerdSocket, "-n", "k8s.io", "images", "rm", proxy).CombinedOutput(); err != nil {
		t.Fatalf("ctr images rm %s on %s: %v: %s", proxy, w.node.Name, err, out)
	}
	p, code, errOut = runWaitInv(t, "cluster-upgrade", inv, "--set", "version="+version, "--set", "destination=local", "--set", "approvePlan=false")
	if want := "pulling " + proxy + " into containerd on " + w.node.Name + " failed"; code == 0 || !strings.Contains(p.Error, want) {
		t.Fatalf("an upgrade whose image %s cannot be pulled: exit %d, %s: %s %s", proxy, code, p.State, p.Error, errOut)
	}
	if s := step(t, p, "snapshot"); s.State != "not-run" {
		t.Errorf("the snapshot of the upgrade whose images were not there: %s", s.State)
	}
	if err := w.node.Import(ctx, good...); err != nil {
		t.Fatal(err)
	}

	t.Run("an API server that cannot start is put back and the run pauses; restore leaves the cluster as it was, etcd from the snapshot", func(t *testing.T) {
		start := time.Now()
		id := startRunInv(t, "cluster-upgrade", inv, "--set", "version="+version, "--set", "destination=local",
			"--set", "approveFirst=false", "--set", "timeout=2m")
		// The plan is asked about before anything changes.
		var asked workflows.Progress
		eventually(t, 3*time.Minute, "the run to ask about the plan", func() bool {
			p, ok := progressOf(t, id)
			asked = p
			return ok && step(t, p, "approve-plan").State == workflows.StateWaiting
		})
		// Its summary, then the diff of each manifest.
		prompt := step(t, asked, "approve-plan").Prompt
		for _, want := range []string{
			kube.APIServer + ": " + images.ControlPlaneRef(kube.APIServer) + " → " + images.ImageRepository + "/" + kube.APIServer + ":" + version + "\n",
			"\n--- " + ctl.node.Name + ":/etc/kubernetes/manifests/" + kube.Scheduler + ".yaml\n",
			"\netcd: 3.6.16 on 1 member(s), kept (" + version + " needs 3.5 or newer)\n",
		} {
			if !strings.Contains(prompt, want) {
				t.Errorf("the plan asked about has no %q:\n%s", want, prompt)
			}
		}
		if added := regexp.MustCompile(`(?m)^\+ +image: ` + regexp.QuoteMeta(images.ImageRepository+"/"+kube.Scheduler+":"+version) + `$`); !added.MatchString(prompt) {
			t.Errorf("the plan's diff does not add the scheduler's %s image:\n%s", version, prompt)
		}
		if s := step(t, asked, "snapshot"); s.State != workflows.StatePending {
			t.Errorf("the snapshot before the plan was approved: %s", s.State)
		}
		if out, errOut, code := kedge(t, "approve", id, "--by", "sre-on-call"); code != 0 {
			t.Fatalf("kedge approve: exit %d: %s %s", code, out, errOut)
		}
		first := rolloutOf(t, id, "first-apiserver")
		var paused workflows.Progress
		eventually(t, 10*time.Minute, "the first API server's rollout to pause", func() bool {
			p, ok := progressOf(t, first)
			paused = p
			return ok && p.State == workflows.StateWaiting
		})
		t.Logf("paused after %s", time.Since(start).Round(time.Second))
		s := step(t, paused, ctl.node.Name)
		// The cluster's only API server down: its pod cannot be seen
		// crash-looping, the wait runs out.
		if s.State != workflows.StateFailed || !strings.Contains(s.LastError, "static pod kube-system/kube-apiserver-"+ctl.node.Name+" not ready after 2m0s") {
			t.Errorf("the first API server's item: %s: %s", s.State, s.LastError)
		}
		// Put back while paused: the manifest from before, its pod of
		// v1.35.4 answering.
		if got := manifests(); got[kube.APIServer] != before[kube.APIServer] {
			t.Errorf("the API server's manifest while paused:\n%s", got[kube.APIServer])
		}
		if v := must(cs.Discovery().ServerVersion()).GitVersion; v != images.KubeVersion {
			t.Errorf("the API server while paused: %s", v)
		}
		// Written after the snapshot: a restore takes it away.
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-the-snapshot"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Restore: abort (the manifest is back already), then etcd from
		// the snapshot taken first, behind etcd-restore's own approval.
		out, errOut, code := kedge(t, "approve", id, "--decision", "restore", "--by", "sre-on-call", "--output", "json")
		if code != 0 {
			t.Fatalf("kedge approve --decision restore: exit %d: %s %s", code, out, errOut)
		}
		restoreRun := id + "/restore-snapshot"
		eventually(t, 5*time.Minute, "etcd-restore to ask before it restores", func() bool {
			p, ok := progressOf(t, restoreRun)
			if !ok {
				return false
			}
			a := step(t, p, "approve")
			return a.State == workflows.StateWaiting && strings.Contains(a.Prompt, "a rollback, asked for over a healthy etcd")
		})
		if out, errOut, code := kedge(t, "approve", id, "--by", "sre-on-call"); code != 0 {
			t.Fatalf("kedge approve (the restore): exit %d: %s %s", code, out, errOut)
		}
		if err := waitClosed(t, id, 15*time.Minute); err == nil || !strings.Contains(err.Error(), "aborted by sre-on-call") ||
			!strings.Contains(err.Error(), "restore asked by sre-on-call: restored (restore-snapshot)") {
			p, _ := watch(t, restoreRun)
			t.Fatalf("the run ended with %v, want an abort by sre-on-call and the restore done\n%s", err, slowSteps(p))
		}
		if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "after-the-snapshot", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the ConfigMap written after the snapshot, after the restore: %v", err)
		}
		if got := manifests(); fmt.Sprint(got) != fmt.Sprint(before) {
			t.Errorf("the manifests after the abort and restore are not the ones before")
		}
		for _, n := range must(cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})).Items {
			if v := n.Status.NodeInfo.KubeletVersion; v != images.KubeVersion || n.Spec.Unschedulable {
				t.Errorf("Node %s after the abort and restore: kubelet %s, unschedulable %v", n.Name, v, n.Spec.Unschedulable)
			}
		}
		t.Logf("failed, put back, paused, aborted and restored: %s", time.Since(start).Round(time.Second))
	})

	// The release's API server as it is.
	if err := ctl.node.Import(ctx, good...); err != nil {
		t.Fatal(err)
	}
	// The upgrade, on a worker of its own, killed once the API server
	// answers the release: a new worker finishes it.
	const queue = "real-upgrade"
	since := time.Now().UTC()
	first := startWorker(t, queue, inv)
	start = time.Now()
	id := startRunInv(t, "cluster-upgrade", inv, "--task-queue", queue, "--set", "version="+version, "--set", "destination=local",
		"--set", "approvePlan=false", "--set", "approveFirst=false")
	eventually(t, 10*time.Minute, "the API server to answer "+version, func() bool {
		v, err := cs.Discovery().ServerVersion()
		return err == nil && v.GitVersion == version
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if p, ok := progressOf(t, id); ok && p.State != workflows.StateRunning {
		t.Fatalf("the upgrade was %s before its worker was killed: nothing to resume", p.State)
	}
	t.Logf("worker killed %s after the start, the API server on %s", time.Since(start).Round(time.Second), version)
	startWorker(t, queue, inv)
	if err := waitClosed(t, id, 20*time.Minute); err != nil {
		p, _ := watch(t, id)
		t.Fatalf("cluster-upgrade after its worker was replaced: %v\n%+v%s", err, p, ctl.node.UnitLog(ctl.host, "kubelet"))
	}
	p, _ = watch(t, id)
	if s := step(t, p, "pull-images"); s.State != workflows.StateSucceeded {
		t.Errorf("pull-images: %s %s", s.State, s.LastError)
	}
	t.Logf("cluster-upgrade of 1 controller + 2 workers on real kubelets to %s: %s; %s", version, time.Since(start).Round(time.Second), slowSteps(p))
	// No component upgraded twice: one run of the component runbook per
	// component (each under the node's workflow ID, one after another).
	resp, err := world.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = 'cluster-upgrade-component' AND StartTime > '%s'", since.Format(time.RFC3339Nano)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, e := range resp.Executions {
		// Other lanes upgrade their own clusters meanwhile.
		if strings.HasPrefix(e.Execution.WorkflowId, rc.name+"/") {
			runs = append(runs, e.Execution.WorkflowId+" "+e.Status.String())
		}
	}
	if len(runs) != len(components) {
		t.Errorf("component runs after the kill: %d (%q), want one per component", len(runs), runs)
	}

	after := manifests()
	for _, c := range components {
		want, err := nodefiles.SetImage(render.SetImageInput{Manifest: before[c], Container: c, Tag: version})
		if err != nil {
			t.Fatal(err)
		}
		if after[c] != want.Content {
			t.Errorf("%s after the upgrade is not the one before with the tag %s:\n%s", c, version, after[c])
		}
	}
	running, err := ctl.node.RunningImages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range components {
		pids := running[images.ImageRepository+"/"+c+":"+version]
		if len(pids) != 1 {
			t.Errorf("%s: %d containers of %s running: %v", ctl.node.Name, len(pids), version, running)
			continue
		}
		out, err := exec.CommandContext(ctx, fmt.Sprintf("/proc/%d/exe", pids[0]), "--version").CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != "Kubernetes "+version {
			t.Errorf("the running %s says %q (%v)", c, got, err)
		}
	}
	if v := must(cs.Discovery().ServerVersion()).GitVersion; v != version {
		t.Errorf("/version after the upgrade: %s", v)
	}
	// kube-proxy, rolled out after the kubelets: the release's binary
	// runs on every node.
	for _, n := range rc.nodes {
		running, err := n.node.RunningImages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pids := running[images.ImageRepository+"/kube-proxy:"+version]
		if len(pids) != 1 {
			t.Errorf("%s: %d kube-proxy containers of %s running: %v", n.node.Name, len(pids), version, running)
			continue
		}
		out, err := exec.CommandContext(ctx, fmt.Sprintf("/proc/%d/exe", pids[0]), "--version").CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != "Kubernetes "+version {
			t.Errorf("the running kube-proxy on %s says %q (%v)", n.node.Name, got, err)
		}
	}
	for _, n := range must(cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})).Items {
		if v := n.Status.NodeInfo.KubeletVersion; v != version || !nodeIsReady(&n) || n.Spec.Unschedulable {
			t.Errorf("Node %s after the upgrade: kubelet %s, ready %v, unschedulable %v", n.Name, v, nodeIsReady(&n), n.Spec.Unschedulable)
		}
	}
	if now := waitDeploymentReady(t, cs, "upgrade-client", 3*time.Minute); now.UID != d.UID {
		t.Errorf("the Deployment was made anew")
	}
}

// waitDeploymentReady waits until every replica of the Deployment (in
// default) is updated, Ready and available, and returns it.
func waitDeploymentReady(t *testing.T, cs kubernetes.Interface, name string, within time.Duration) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	var err error
	for deadline := time.Now().Add(within); ; time.Sleep(time.Second) {
		d, err = cs.AppsV1().Deployments("default").Get(t.Context(), name, metav1.GetOptions{})
		if err == nil && d.Spec.Replicas != nil {
			want := *d.Spec.Replicas
			if s := d.Status; s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want && s.AvailableReplicas == want {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Deployment %s not ready after %s (%v): %+v%s", name, within, err, d.Status, podEvents(t.Context(), cs, name))
		}
	}
}
