package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kedge.dev/kedge/integration/controlplane"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/workflows"
)

// Typhoon's etcd image and the releases etcd-upgrade takes it to: the
// newest 3.5 patch the tools build (etcd's guide to 3.6 asks for a late
// 3.5 first), then 3.6, the world's Kedge-layout etcd (built by
// scripts/kube-tools.sh).
const (
	etcdPatchImage  = "quay.io/coreos/etcd:v3.5.36"
	etcdPatchBinary = "etcd-v3.5.36"
	etcdMinorImage  = "quay.io/coreos/etcd:v3.6.16"
)

// addEtcdReleases puts the etcd releases etcd-upgrade goes to in the
// host's image store (the registry the world's hosts pull from holds
// them), each the real binary of its release.
func addEtcdReleases(t *testing.T, h *testhosts.Host, tools string) {
	t.Helper()
	for ref, bin := range map[string]string{etcdPatchImage: filepath.Join(tools, etcdPatchBinary), etcdMinorImage: filepath.Join(tools, "etcd")} {
		prog, err := h.InstallProgram("etcd-"+ref[strings.LastIndex(ref, ":")+1:], bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.AddImage(testhosts.Image{Ref: ref, Entrypoint: []string{prog}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEtcdUpgradeOnTyphoonCluster upgrades the etcd of a Typhoon world
// (3 controllers, real etcd v3.5.13 members run by etcd-member.service
// through docker on Flatcar and podman on Fedora CoreOS) with the real
// binaries of each release: 3.6 straight from 3.5.13 is refused before
// anything changes; the patch 3.5.36 is planned, approved and rolled
// member by member, followers first and the leader last; then 3.6.16. The
// API answers throughout and what was written before is there after. The
// world, its etcd on 3.6.16, goes on to the lane's next test
// (TestControllerReplaceOnTyphoonCluster: a controller provisioned with
// Typhoon's config, which names 3.5.13, joins it).
func TestEtcdUpgradeOnTyphoonCluster(t *testing.T) {
	typhoonDRLane.join(t)
	w := typhoonDRWorld(t, "typhoon-etcd-upgrade")
	ctx := t.Context()
	inv, _ := localBackupsInventory(t, w.inventory)
	tools, err := controlplane.Tools()
	if err != nil {
		t.Fatal(err)
	}
	// The registry the controllers pull from holds both releases.
	controllers := []string{"tyc1", "tyc2", "tyc3"}
	for _, name := range controllers {
		addEtcdReleases(t, w.host(t, name), tools)
	}
	versions := func() []string {
		var out []string
		for _, c := range controllers {
			out = append(out, w.etcdServerVersion(t, c))
		}
		return out
	}
	dropIns := func() []string {
		var out []string
		for _, c := range controllers {
			b, _ := w.host(t, c).ReadFile("/etc/systemd/system/etcd-member.service.d/10-image.conf")
			out = append(out, string(b))
		}
		return out
	}
	before, err := w.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before-etcd-upgrade"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// 3.6 from 3.5.13: refused by the plan, nothing changed.
	p, code, errOut := runWaitInv(t, "etcd-upgrade", inv, "--set", "version=3.6.16", "--set", "destination=local")
	if st := step(t, p, "plan"); code == 0 || st.State != workflows.StateFailed || st.Attempts != 1 ||
		!strings.Contains(st.LastError, "etcd member tyc1 runs 3.5.13: etcd's guide to 3.6 asks every 3.5 member to run 3.5.32 or later first") {
		t.Fatalf("etcd-upgrade to 3.6 from 3.5.13: exit %d, plan %+v: %s", code, st, errOut)
	}
	if got := versions(); !slices.Equal(got, []string{"3.5.13", "3.5.13", "3.5.13"}) || slices.ContainsFunc(dropIns(), func(s string) bool { return s != "" }) {
		t.Fatalf("after the refusal: etcd %v, drop-ins %q", got, dropIns())
	}

	// The API polled throughout both upgrades: the longest time no
	// request succeeded.
	var mu sync.Mutex
	var longest time.Duration
	pollCtx, stopPoll := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		last := time.Now()
		for pollCtx.Err() == nil {
			c, cancel := context.WithTimeout(pollCtx, 2*time.Second)
			_, err := w.client.CoreV1().ConfigMaps("default").Get(c, before.Name, metav1.GetOptions{})
			cancel()
			now := time.Now()
			mu.Lock()
			if err == nil {
				last = now
			} else if gap := now.Sub(last); gap > longest && pollCtx.Err() == nil {
				longest = gap
			}
			mu.Unlock()
			select {
			case <-pollCtx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()

	// The patch: planned, approved, member by member with the leader last.
	leader := w.etcdLeader(t)
	began := time.Now()
	id := startRunInv(t, "etcd-upgrade", inv, "--set", "version=3.5.36", "--set", "destination=local")
	gate := waitForGate(t, id, "approve-plan", 5*time.Minute)
	for _, want := range []string{"etcd 3.5.13 to 3.5.36, 3 of 3 member(s), one at a time, the leader last:",
		leader + " (" + leader + ", leader): quay.io/coreos/etcd:v3.5.13 -> " + etcdPatchImage + " in /etc/systemd/system/etcd-member.service.d/10-image.conf"} {
		if !strings.Contains(gate.Prompt, want) {
			t.Errorf("the plan's prompt lacks %q:\n%s", want, gate.Prompt)
		}
	}
	if out, errOut, code := kedge(t, "approve", id, "--by", "sre-on-call"); code != 0 {
		t.Fatalf("kedge approve: exit %d: %s %s", code, out, errOut)
	}
	if err := waitClosed(t, id, 10*time.Minute); err != nil {
		t.Fatalf("etcd-upgrade to 3.5.36: %v", err)
	}
	t.Logf("etcd-upgrade 3.5.13 to 3.5.36, 3 members: %s", time.Since(began).Round(time.Second))
	pr := must(queryProgress(id))
	members := rolloutOf(t, id, "members")
	rp, _ := progressOf(t, members)
	var order []string
	for _, it := range rp.Steps {
		order = append(order, it.ID)
	}
	if len(order) != 3 || order[2] != leader {
		t.Errorf("members upgraded in the order %v; the leader %s last", order, leader)
	}
	if got := versions(); !slices.Equal(got, []string{"3.5.36", "3.5.36", "3.5.36"}) {
		t.Errorf("after the patch: etcd %v", got)
	}
	for i, d := range dropIns() {
		if !strings.Contains(d, `Environment="ETCD_IMAGE=`+etcdPatchImage+`"`) {
			t.Errorf("%s's drop-in: %q", controllers[i], d)
		}
	}
	if s, _ := pr.Outputs["snapshot"].(string); !strings.HasPrefix(s, w.name+"/etcd/") {
		t.Errorf("the run's snapshot output: %v", pr.Outputs)
	}

	// The minor, with no gate.
	began = time.Now()
	p, code, errOut = runWaitInv(t, "etcd-upgrade", inv, "--set", "version=3.6.16", "--set", "destination=local", "--set", "approvePlan=false")
	if code != 0 {
		t.Fatalf("etcd-upgrade to 3.6.16: exit %d: %s\n%+v", code, errOut, p)
	}
	t.Logf("etcd-upgrade 3.5.36 to 3.6.16, 3 members: %s", time.Since(began).Round(time.Second))
	stopPoll()
	<-polled
	if got := versions(); !slices.Equal(got, []string{"3.6.16", "3.6.16", "3.6.16"}) {
		t.Errorf("after the minor: etcd %v", got)
	}
	mu.Lock()
	t.Logf("the longest the API answered nothing during both upgrades: %s", longest.Round(time.Millisecond))
	mu.Unlock()
	got, err := w.client.CoreV1().ConfigMaps("default").Get(ctx, before.Name, metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Errorf("the ConfigMap written before: %v %v", got, err)
	}
	if _, err := w.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-etcd-upgrade"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("a write after the upgrade: %v", err)
	}

	// Again: every member runs it, nothing to do.
	p, code, errOut = runWaitInv(t, "etcd-upgrade", inv, "--set", "version=3.6.16", "--set", "destination=local")
	if code != 0 || step(t, p, "members").State == workflows.StateSucceeded || !strings.Contains(fmt.Sprint(p.Outputs["summary"]), "nothing to do") {
		t.Errorf("etcd-upgrade to the release it runs: exit %d: %s\n%+v", code, errOut, p)
	}
	w.handOn = true
}

// etcdLeader is the name of etcd's leader, as tyc1's member says.
func (w *typhoonLab) etcdLeader(t *testing.T) string {
	t.Helper()
	cl, addr := w.etcdClientOf(t, "tyc1")
	post := func(path string, v any) {
		resp, err := cl.Post("https://"+addr+":2379"+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	var st struct {
		Leader string `json:"leader"`
	}
	post("/v3/maintenance/status", &st)
	var list struct {
		Members []struct {
			ID   string `json:"ID"`
			Name string `json:"name"`
		} `json:"members"`
	}
	post("/v3/cluster/member/list", &list)
	for _, m := range list.Members {
		if m.ID == st.Leader {
			return m.Name
		}
	}
	t.Fatalf("etcd's leader %q is none of its members %+v", st.Leader, list.Members)
	return ""
}
