package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/typhoon"
	"kedge.dev/kedge/workflows"
)

// The versions the Typhoon world's hosts are offered: the next Fedora
// CoreOS and Flatcar releases after the ones they first boot.
var typhoonOSOffer = map[string]string{typhoon.FCOS: "40.20240504.3.0", typhoon.Flatcar: "3815.2.5"}

// os-update of the Typhoon-built cluster, adopted: 3 controllers
// (Flatcar, Fedora CoreOS, Flatcar: etcd-member.service, the control
// plane as static pods) and 2 workers (Flatcar, Fedora CoreOS), each
// host offered its OS's next release. Every node stages it with its own
// tool (rpm-ostree, update_engine_client), is drained, reboots once (a
// new boot ID, its units started by the boot) into it, posts Ready from
// the new boot and is uncordoned; never more than maxUnavailable (2)
// nodes are cordoned at once (the world's two workers go one at a time:
// the first alone, then the rest); the controllers go one at a time, each
// only while every etcd member is healthy, and each is back (its member
// healthy again, though the test holds the last one's back at its boot)
// before its uncordon; never more than one API server is down and one
// serves throughout. A second run stages nothing and reboots nothing.
func TestOSUpdateOnTyphoonCluster(t *testing.T) {
	typhoonLane.join(t)
	typhoonWorld(t)
	// etcd's CA: adopt takes Typhoon's into Vault, where the quorum
	// check's client certificate comes from.
	adoptTyphoon(t)
	cs, inv := typhoonBuilt.client, typhoonBuilt.inventory
	ctx := t.Context()

	type node struct {
		spec  typhoonHostSpec
		host  *testhosts.Host
		boots int
		boot  string
	}
	var nodes, controllers []*node
	for i, spec := range typhoonHosts {
		if spec.spare {
			continue
		}
		h := typhoonBuilt.lab.Hosts[i]
		if err := h.OfferUpdate(testhosts.Update{Version: typhoonOSOffer[spec.flavor]}); err != nil {
			t.Fatal(err)
		}
		n := &node{spec: spec, host: h, boots: h.Boots(), boot: must(h.BootID())}
		nodes = append(nodes, n)
		if spec.controller {
			controllers = append(controllers, n)
		}
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = n.host.OfferUpdate(testhosts.Update{})
		}
	})
	var addrs []string
	for _, c := range controllers {
		addrs = append(addrs, c.host.Address)
	}
	// The last controller's etcd member starts late at its next boot (a
	// member catching up with a large database): its kubelet posts Ready
	// long before etcd is whole again, which the run must wait for.
	last := controllers[len(controllers)-1].host
	slowEtcd := layout.UnitDir + "/etcd-member.service.d/10-slow-start.conf"
	if err := last.WriteFile(slowEtcd, slowStart(t, must(last.ReadFile(layout.UnitDir+"/etcd-member.service")), slowEtcdStart), 0o644); err != nil {
		t.Fatal(err)
	}
	unslow := func() {
		_, _ = last.Exec(context.Background(), "sh", "-c", "rm -f "+slowEtcd+" && systemctl daemon-reload")
	}
	t.Cleanup(unslow)
	if out, err := last.Exec(ctx, "systemctl", "daemon-reload"); err != nil {
		t.Fatalf("%s: daemon-reload: %v: %s", last.Name, err, out)
	}
	w := watchTyphoonUpdate(t, addrs)

	began := time.Now()
	p, code, errOut := runWaitInv(t, "os-update", inv, "--set", "maxUnavailable=2",
		"--set", "approveFirst=false", "--set", "approveControllers=false", "--set", "drainTimeout=2m")
	took := time.Since(began)
	w.stop()
	unslow()
	// etcd is whole as the run ends: every member answers, with a leader.
	etcdClient, _ := typhoonBuilt.etcdClientOf(t, "tyc1")
	if down := etcdDown(ctx, etcdClient, addrs); down != 0 {
		t.Errorf("%d etcd members down or without a leader as os-update ends", down)
	}
	if code != 0 {
		for _, n := range controllers {
			for _, unit := range []string{"kubelet.service", "etcd-member.service"} {
				b, _ := n.host.ReadFile("/var/log/units/" + unit + ".log")
				t.Logf("%s %s log tail:\n%s", n.spec.name, unit, tail(string(b), 3000))
			}
		}
		t.Fatalf("os-update: exit %d: %s\n%+v", code, errOut, p)
	}

	// Each node: rebooted once, into the offered release, with its
	// units started by that boot; Ready, schedulable, reporting the boot.
	var perNode []string
	type span struct{ from, to time.Time }
	reboots := map[string]span{}
	for _, n := range nodes {
		name, h := n.spec.name, n.host
		if got := h.Boots() - n.boots; got != 1 {
			ps, _ := h.Exec(ctx, "ps", "-eo", "pid,etime,args")
			t.Errorf("%s rebooted %d times, want 1; its processes:\n%s", name, got, ps)
		}
		osRelease := string(must(h.ReadFile("/etc/os-release")))
		if want := typhoonOSOffer[n.spec.flavor]; !strings.Contains(osRelease, "VERSION_ID="+want+"\n") && !strings.Contains(osRelease, "OSTREE_VERSION='"+want+"'") {
			t.Errorf("%s runs, after its update:\n%s\nwant %s", name, osRelease, want)
		}
		units := []string{"kubelet.service"}
		if n.spec.controller {
			units = append(units, "etcd-member.service")
		}
		for _, u := range units {
			if out, err := h.Exec(ctx, "systemctl", "is-active", u); err != nil || strings.TrimSpace(string(out)) != "active" {
				t.Errorf("%s: %s %q after the reboot (%v)", name, u, out, err)
			}
		}
		fqdn := typhoonFQDN(name)
		checkNodeBootID(t, cs, h, fqdn, n.boot)
		if k8sNode, err := cs.CoreV1().Nodes().Get(ctx, fqdn, metav1.GetOptions{}); err != nil || !nodeIsReady(k8sNode) || k8sNode.Spec.Unschedulable {
			t.Errorf("%s after os-update: %v", fqdn, err)
		}
		run, err := queryProgress(workflows.NodeWorkflowID(typhoonCluster, name))
		if err != nil {
			t.Fatalf("%s's os-update-node: %v", name, err)
		}
		for _, id := range []string{"cordon", "drain", "reboot", "booted", "ready", "uncordon"} {
			if s := step(t, run, id); s.State != workflows.StateSucceeded {
				t.Errorf("%s: %s %s: %s", name, id, s.State, s.LastError)
			}
		}
		cordon, uncordon := step(t, run, "cordon"), step(t, run, "uncordon")
		if cordon.StartedAt != nil && uncordon.EndedAt != nil {
			reboots[name] = span{*cordon.StartedAt, *uncordon.EndedAt}
		}
		if n.spec.controller {
			if s := step(t, run, "etcd-back"); s.State != workflows.StateSucceeded {
				t.Errorf("%s: etcd-back %s: %s", name, s.State, s.LastError)
			}
			if s := step(t, run, "quorum"); s.State != workflows.StateSucceeded || s.EndedAt == nil || cordon.StartedAt == nil || s.EndedAt.After(*cordon.StartedAt) {
				t.Errorf("%s: etcd's quorum checked %s (ended %v), cordon started %v", name, s.State, s.EndedAt, cordon.StartedAt)
			}
		}
		d, err := world.client.DescribeWorkflowExecution(ctx, workflows.NodeWorkflowID(typhoonCluster, name), "")
		if err != nil {
			t.Fatal(err)
		}
		info := d.GetWorkflowExecutionInfo()
		var steps []string
		for _, s := range run.Steps {
			if s.StartedAt != nil && s.EndedAt != nil {
				steps = append(steps, fmt.Sprintf("%s %.1fs", s.ID, s.EndedAt.Sub(*s.StartedAt).Seconds()))
			}
		}
		perNode = append(perNode, fmt.Sprintf("%s (%s) %.1fs [%s]", name, n.spec.flavor, info.GetCloseTime().AsTime().Sub(info.GetStartTime().AsTime()).Seconds(), strings.Join(steps, ", ")))
	}
	// The controllers one at a time: one's cordon after the one before's
	// uncordon.
	for i := 1; i < len(controllers); i++ {
		a, b := reboots[controllers[i-1].spec.name], reboots[controllers[i].spec.name]
		if b.from.Before(a.to) {
			t.Errorf("%s cordoned at %s, before %s was uncordoned (%s)", controllers[i].spec.name, b.from.Format(time.StampMilli), controllers[i-1].spec.name, a.to.Format(time.StampMilli))
		}
	}
	if got := etcdMembers(t); !slices.Equal(got, []string{"tyc1", "tyc2", "tyc3"}) {
		t.Errorf("etcd members after os-update: %v", got)
	}
	w.check(t, 2)
	t.Logf("os-update of 3 controllers + 2 workers on the Typhoon-built cluster: %s; each node's runbook (stage, cordon, drain, reboot, Ready, uncordon): %s",
		took.Round(time.Second), strings.Join(perNode, ", "))

	// Again: nothing is staged, nothing reboots.
	began = time.Now()
	p, code, errOut = runWaitInv(t, "os-update", inv, "--set", "maxUnavailable=2",
		"--set", "approveFirst=false", "--set", "approveControllers=false")
	if code != 0 {
		t.Fatalf("os-update again: exit %d: %s\n%+v", code, errOut, p)
	}
	t.Logf("os-update again, nothing to stage: %s", time.Since(began).Round(time.Second))
	for _, n := range nodes {
		if got := n.host.Boots() - n.boots; got != 1 {
			t.Errorf("%s booted %d times since the first run began, want 1", n.spec.name, got)
		}
		run, err := queryProgress(workflows.NodeWorkflowID(typhoonCluster, n.spec.name))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"cordon", "reboot"} {
			if s := step(t, run, id); s.State != workflows.StateSkipped {
				t.Errorf("%s, nothing to stage: %s %s", n.spec.name, id, s.State)
			}
		}
	}
}

// slowEtcdStart is how late the last controller's etcd member starts
// at its reboot in TestOSUpdateOnTyphoonCluster.
const slowEtcdStart = 8 * time.Second

// typhoonUpdateWatch samples, until stopped, the Typhoon world's
// controllers: whose API server answers at all and serves a read (a
// quorum read from etcd, which may take a leader election's second),
// whose etcd member answers for itself with a leader, and how many
// Nodes are cordoned.
type typhoonUpdateWatch struct {
	mu sync.Mutex
	// maxCordoned: the most Nodes cordoned at once; maxAPIDown and
	// maxEtcdDown the most API servers and etcd members not answering at
	// once; noAPI how many samples found no API server serving.
	maxCordoned, maxAPIDown, maxEtcdDown, noAPI, samples int
	// cordonedUnhealthy: controllers found newly cordoned while an etcd
	// member was down in the sample before.
	cordonedUnhealthy []string
	// slowAPI: API servers' answers that took over the client's timeout.
	slowAPI []string
	stop    func()
}

func watchTyphoonUpdate(t *testing.T, addrs []string) *typhoonUpdateWatch {
	t.Helper()
	w := &typhoonUpdateWatch{}
	etcd, _ := typhoonBuilt.etcdClientOf(t, "tyc1")
	var clients []kubernetes.Interface
	for _, a := range addrs {
		clients = append(clients, kubeClientAt(t, typhoonBuilt.kubeconfig, a+":6443"))
	}
	controllers := map[string]bool{}
	for _, h := range typhoonHosts {
		if h.controller && !h.spare {
			controllers[typhoonFQDN(h.name)] = true
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var etcdWasDown []string
		wasCordoned := map[string]bool{}
		for ctx.Err() == nil {
			// etcd first, then the Nodes: a controller first seen
			// cordoned in this sample was not cordoned when the last
			// sample's Nodes were listed, so the last sample's etcd is
			// what the cordon found (asked after the Nodes, it could be
			// the cordoned controller's own reboot).
			etcdWhy := etcdDownWhy(ctx, etcd, addrs)
			etcdDown := len(etcdWhy)
			// Each API server asked at once: a Node list, which is a
			// quorum read.
			lists := make([]*corev1.NodeList, len(clients))
			answered := make([]bool, len(clients))
			var wg sync.WaitGroup
			for i, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
					var status apierrors.APIStatus
					var netErr net.Error
					// Down is not listening (its host rebooting); one
					// that took over the client's 5 s (its etcd client
					// moving off a member that went down, on a busy
					// machine) is slow, counted apart.
					slow := errors.As(err, &netErr) && netErr.Timeout()
					lists[i], answered[i] = list, err == nil || errors.As(err, &status) || slow
					if err != nil {
						lists[i] = nil
					}
					if slow {
						w.mu.Lock()
						w.slowAPI = append(w.slowAPI, err.Error())
						w.mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if ctx.Err() != nil {
				return
			}
			apiDown, serving := 0, -1
			for i := range clients {
				if !answered[i] {
					apiDown++
				}
				if lists[i] != nil && serving < 0 {
					serving = i
				}
			}
			w.mu.Lock()
			w.samples++
			w.maxAPIDown, w.maxEtcdDown = max(w.maxAPIDown, apiDown), max(w.maxEtcdDown, etcdDown)
			if serving < 0 {
				w.noAPI++
			} else {
				cordoned := map[string]bool{}
				for _, n := range lists[serving].Items {
					if n.Spec.Unschedulable {
						cordoned[n.Name] = true
					}
				}
				w.maxCordoned = max(w.maxCordoned, len(cordoned))
				for n := range cordoned {
					if controllers[n] && !wasCordoned[n] && etcdWasDown != nil {
						w.cordonedUnhealthy = append(w.cordonedUnhealthy, fmt.Sprintf("%s (the sample before: %s)", n, strings.Join(etcdWasDown, "; ")))
					}
				}
				wasCordoned = cordoned
			}
			w.mu.Unlock()
			etcdWasDown = etcdWhy
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	w.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(w.stop)
	return w
}

// check says what the watch saw against what os-update promises.
func (w *typhoonUpdateWatch) check(t *testing.T, maxUnavailable int) {
	t.Helper()
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("over %d samples: at most %d Nodes cordoned, %d API servers and %d etcd members down at once; no API server serving in %d; %d answers over the timeout %q",
		w.samples, w.maxCordoned, w.maxAPIDown, w.maxEtcdDown, w.noAPI, len(w.slowAPI), w.slowAPI)
	if w.maxCordoned == 0 || w.maxCordoned > maxUnavailable {
		t.Errorf("at most %d Nodes cordoned at once, want 1 to %d", w.maxCordoned, maxUnavailable)
	}
	if w.maxAPIDown > 1 || w.maxEtcdDown > 1 || w.noAPI > 0 {
		t.Errorf("%d API servers and %d etcd members down at once, no API server serving in %d samples: want one controller down at a time, the API served throughout", w.maxAPIDown, w.maxEtcdDown, w.noAPI)
	}
	if len(w.cordonedUnhealthy) > 0 {
		t.Errorf("controllers cordoned while an etcd member was down: %v", w.cordonedUnhealthy)
	}
}

// etcdDown is how many of the etcd members at addrs do not answer for
// themselves (their status: a serializable request, which a member
// answers without a quorum) with a leader. A member that answers while
// the others elect a new leader is not down.
func etcdDown(ctx context.Context, cl *http.Client, addrs []string) int {
	return len(etcdDownWhy(ctx, cl, addrs))
}

// etcdDownWhy asks every member at once and says, for each one down or
// without a leader, why (a member that is up answers within 5 s even on
// a machine busy with other tests).
func etcdDownWhy(ctx context.Context, cl *http.Client, addrs []string) []string {
	why := make([]string, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := etcdMemberUp(ctx, cl, a); err != nil {
				why[i] = fmt.Sprintf("%s: %v", a, err)
			}
		}()
	}
	wg.Wait()
	var down []string
	for _, w := range why {
		if w != "" {
			down = append(down, w)
		}
	}
	return down
}

func etcdMemberUp(ctx context.Context, cl *http.Client, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+":2379/v3/maintenance/status", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var st struct {
		Leader string   `json:"leader"`
		Errors []string `json:"errors"`
	}
	switch {
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("status %s", resp.Status)
	case json.NewDecoder(resp.Body).Decode(&st) != nil:
		return errors.New("an answer that is no status")
	case st.Leader == "" || st.Leader == "0":
		return errors.New("no leader")
	case len(st.Errors) > 0:
		return fmt.Errorf("errors %q", st.Errors)
	}
	return nil
}

// slowStart is a drop-in for the unit whose text is unit that has it
// start late by d: its ExecStartPre lines again, after a sleep (a reset
// first, as systemd lists them).
func slowStart(t *testing.T, unit []byte, d time.Duration) []byte {
	t.Helper()
	var pre []string
	cont := false
	for _, line := range strings.Split(string(unit), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "ExecStartPre=") || cont {
			pre = append(pre, line)
			cont = strings.HasSuffix(line, "\\")
		}
	}
	if len(pre) == 0 {
		t.Fatalf("no ExecStartPre in:\n%s", unit)
	}
	return []byte(fmt.Sprintf("[Service]\nExecStartPre=\nExecStartPre=/bin/sleep %d\n%s\n", int(d.Seconds()), strings.Join(pre, "\n")))
}
