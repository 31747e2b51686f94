package integration

import (
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/typhoon"
)

// Disaster-recovery tests break their cluster (members killed, data
// directories deleted, a controller's host lost): each builds a world of
// its own and stops it at its end. The worlds of one kind share their
// addresses, so their tests run in one lane (typhoonDRLane,
// kedgeHALane), beside the shared worlds' lanes.

// typhoonDRHosts are a disaster-recovery Typhoon world's hosts: the
// shared world's, and a spare controller, tyc4: a machine Typhoon's
// provisioner would make a controller of, its OS given and nothing else.
var typhoonDRHosts = append(slices.Clone(typhoonHosts), typhoonHostSpec{"tyc4", typhoon.FCOS, true, true})

// typhoonDRNext is the world a test that passed left whole (handOn) for
// the lane's next test: a world is a minute or two to build and adopt.
var typhoonDRNext nextWorld[typhoonLab]

// nextWorld holds a disaster-recovery world a test that passed left whole
// for its lane's next test.
type nextWorld[W any] struct {
	mu sync.Mutex
	w  *W
}

// take returns the world handed on, if any, and holds it no more.
func (n *nextWorld[W]) take() *W {
	n.mu.Lock()
	defer n.mu.Unlock()
	w := n.w
	n.w = nil
	return w
}

// give keeps w for the lane's next test; stop stops it at the package's
// end if no test took it.
func (n *nextWorld[W]) give(w *W, stop func()) {
	n.mu.Lock()
	n.w = w
	n.mu.Unlock()
	atWorldEnd(func() {
		n.mu.Lock()
		left := n.w == w
		if left {
			n.w = nil
		}
		n.mu.Unlock()
		if left {
			stop()
		}
	})
}

// typhoonDRWorld returns a Typhoon world for the calling test alone: the
// one the lane's last test handed on (checked first, under the name it
// was built with), or one built now as buildTyphoon builds the shared one
// (3 controllers with real etcd members, 2 workers, the spares) under the
// cluster name name and adopted into Vault, on typhoonDRLane's addresses
// (the shared world's lane runs beside it). It is stopped when the test
// ends, failed or not, unless the test hands it on and passes.
func typhoonDRWorld(t *testing.T, name string) *typhoonLab {
	t.Helper()
	if w := typhoonDRNext.take(); w != nil {
		t.Cleanup(func() { w.release(t) })
		t.Logf("Typhoon world %s: handed on by the lane's last test", w.name)
		w.check(t)
		return w
	}
	w := &typhoonLab{name: name, dir: "typhoon-" + name, hosts: typhoonDRHosts, baseIP: "127.0.47."}
	t.Cleanup(func() { w.release(t) })
	began := time.Now()
	if err := buildTyphoon(t, w); err != nil {
		t.Fatalf("Typhoon world %s: %v", name, err)
	}
	adoptTyphoonLab(t, w)
	t.Logf("Typhoon world %s (3 controllers + 2 workers), adopted: %s", name, time.Since(began).Round(time.Second))
	w.check(t)
	return w
}

// release ends t's use of a disaster-recovery world: handed on to the
// lane's next test when t asked for that and passed, its hosts stopped
// otherwise. A world handed on that no test takes stops at the package's
// end.
func (w *typhoonLab) release(t *testing.T) {
	if !w.handOn || t.Failed() {
		w.close()
		return
	}
	w.handOn = false
	typhoonDRNext.give(w, w.close)
}

// host is the world's host called name.
func (w *typhoonLab) host(t *testing.T, name string) *testhosts.Host {
	t.Helper()
	for _, h := range w.lab.Hosts {
		if h.Name == name {
			return h
		}
	}
	t.Fatalf("no host %s in the Typhoon world %s", name, w.name)
	return nil
}

// check checks a disaster-recovery world before its test breaks it: a
// world of its own, its three etcd members healthy, its spare controller
// reachable and bare, its inventory naming its own cluster. (Each DR test
// checks its world: no test builds one only to check it.)
func (w *typhoonLab) check(t *testing.T) {
	t.Helper()
	if got := w.etcdMembersVia(t, "tyc1"); !slices.Equal(got, []string{"tyc1", "tyc2", "tyc3"}) {
		t.Fatalf("Typhoon world %s: etcd members: %v", w.name, got)
	}
	spare := w.host(t, "tyc4")
	if out, err := spare.Exec(t.Context(), "sh", "-c", "test ! -e /etc/systemd/system/etcd-member.service && test ! -e /etc/kubernetes/kubeconfig && echo bare"); err != nil || string(out) != "bare\n" {
		t.Fatalf("Typhoon world %s: tyc4 is not a bare machine: %q (%v)", w.name, out, err)
	}
	inv := string(must(os.ReadFile(w.inventory)))
	if lines := strings.Split(inv, "\n"); !slices.Contains(lines, "  name: "+w.name) || slices.Contains(lines, "  - name: tyc4") {
		t.Fatalf("Typhoon world %s: inventory:\n%s", w.name, inv)
	}
}
