package integration

import (
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"kedge.dev/kedge/internal/testreport"
)

// A lane is a line of tests that share what no two of them may use at
// once: a world they build once (the Typhoon cluster, the real kubelets'
// cluster), the addresses every world of their kind binds (the
// disaster-recovery worlds, one per test), or the shared world's quiet
// (mainLane: every test of the package outside the other lanes). A
// lane's tests run one at a time, in the order of the source (the order
// `go test` starts them), while the other lanes' tests run beside them:
// every test of the package joins a lane first thing and is parallel
// (t.Parallel), so all lanes start at once, as many as the machine has
// slots for.
//
// Most of what these tests do is wait on servers (static pods restarting,
// etcd members catching up, kubelets rotating), so lanes side by side
// fill the machine's idle time.
type lane struct {
	name  string
	rank  int    // the order lanes get the machine in (slots)
	slots *slots // what it takes a slot of
	// light: the lane holds no slot of the machine. Its world lives in
	// network namespaces of its own, binds none of the others'
	// addresses, and mostly waits on the servers it runs.
	light bool

	mu      sync.Mutex
	turn    *sync.Cond
	tickets int  // handed out, in source order
	serving int  // the ticket whose test runs now
	holds   bool // a slot of the machine, from its first test to its last
}

// slots are the machine's share-out between lanes: how many run at once.
// A lane holds its slot from its first test to its last (its world lives
// that long); lanes waiting for one get it in their rank's order, the
// longest lane first.
type slots struct {
	mu      sync.Mutex
	free    *sync.Cond
	n       int
	waiting map[*lane]bool
}

func newSlots(n int) *slots {
	s := &slots{n: n, waiting: map[*lane]bool{}}
	s.free = sync.NewCond(&s.mu)
	return s
}

// machine is the package's slots: KEDGE_IT_LANES, 2 by default. Every
// lane at once overloaded the 2-core machine: its worlds' API servers
// and etcd members alone took every CPU, queries and TLS handshakes
// timed out, tests failed.
var machine = newSlots(lanesAtOnce())

// lanesAtOnce is KEDGE_IT_LANES, or 2.
func lanesAtOnce() int {
	if n, err := strconv.Atoi(os.Getenv("KEDGE_IT_LANES")); err == nil && n > 0 {
		return n
	}
	return 2
}

// takeSlot waits for a slot of the machine, after every waiting lane of
// a lower rank.
func (l *lane) takeSlot() {
	s := l.slots
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.n == 0 || l.outranked() {
		s.free.Wait()
	}
	delete(s.waiting, l)
	s.n--
	s.free.Broadcast()
}

// outranked says whether a waiting lane goes before l.
func (l *lane) outranked() bool {
	for o := range l.slots.waiting {
		if o.rank < l.rank {
			return true
		}
	}
	return false
}

func (l *lane) giveSlot() {
	s := l.slots
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	s.free.Broadcast()
}

// The package's lanes. A world's IP range belongs to one lane. Ranks
// put the longest lanes first (measured alone: the disaster-recovery
// lane ~680 s, the Typhoon lane ~530 s, the main lane ~490 s, the Kedge
// HA lane ~270 s), so that no long lane starts last: with two slots the
// package ends near half their sum.
var (
	// typhoonDRLane: a Typhoon world per test that breaks it
	// (typhoonDRWorld), 127.0.47.x.
	typhoonDRLane = newLane("typhoon-dr", 0)
	// typhoonLane: the shared Typhoon world (typhoonWorld), 127.0.45.x.
	typhoonLane = newLane("typhoon", 1)
	// realLane: the real kubelets' cluster (sharedRealCluster), and the
	// tests that start real nodes of their own beside it. Light: its
	// nodes live in network namespaces of their own, and its tests wait
	// on restarts of real static pods and kubelets (the lane alone took
	// 179 CPU seconds in 12 minutes: a seventh of the machine).
	realLane = newLightLane("real-kubelets", 2)
	// mainLane: every test outside the other lanes, in the order they
	// ran before lanes: the shared world's worker, labs of their own
	// (127.0.2x.x, 127.0.40.x), the bootstrapped cluster (127.0.25.x,
	// every listener on its node's address).
	mainLane = newLane("main", 3)
	// kedgeHALane: a Kedge HA world per test (kedgeHAWorld, which a test
	// that leaves it whole hands on), 127.0.61.x.
	kedgeHALane = newLane("kedge-ha", 4)
)

// laneParallel is the package's -test.parallel: more than the package
// has tests, so every test is let go at once to wait for its turn in its
// lane. With fewer, the tests let go could all be waiting behind a lane's
// next test that is not (every test of the package is parallel).
const laneParallel = 1024

func newLane(name string, rank int) *lane { return newLaneOf(machine, name, rank) }

// newLaneOf is a lane that takes its slot of s.
func newLaneOf(s *slots, name string, rank int) *lane {
	l := &lane{name: name, rank: rank, slots: s}
	l.turn = sync.NewCond(&l.mu)
	return l
}

// newLightLane is a lane that runs beside the others without a slot.
func newLightLane(name string, rank int) *lane {
	l := newLane(name, rank)
	l.light = true
	return l
}

// join makes t the lane's next test: parallel to the tests of the other
// lanes, after the tests before it in this one. Call it first in the
// test. The time it waits for its turn is logged as testreport.LaneWait
// reads it, so the report does not count it as the test's own.
func (l *lane) join(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	ticket := l.tickets
	l.tickets++
	l.mu.Unlock()
	if ticket == 0 && !l.light {
		// In line for a slot from now (every lane joins before any
		// runs), so that lanes get theirs by rank, not by a race.
		l.slots.mu.Lock()
		l.slots.waiting[l] = true
		l.slots.mu.Unlock()
	}

	t.Parallel()
	began := time.Now()
	l.mu.Lock()
	for l.serving != ticket {
		l.turn.Wait()
	}
	first, last := !l.holds && !l.light, ticket == l.tickets-1 && !l.light
	l.holds = true
	l.mu.Unlock()
	if first {
		l.takeSlot()
	}
	// Registered first, so it runs last: the next test starts after this
	// one's cleanups (a world's teardown among them).
	t.Cleanup(func() {
		if last {
			l.giveSlot()
		}
		l.mu.Lock()
		l.serving++
		l.turn.Broadcast()
		l.mu.Unlock()
	})
	if waited := time.Since(began); waited >= 100*time.Millisecond {
		t.Logf("waited %s for its turn in lane %s", waited.Round(100*time.Millisecond), l.name)
	}
}

// The lane's wait line is the one the report takes out of the test's
// time; a lane's tests run one at a time, in the order they joined.
func TestLaneRunsItsTestsInOrderAndSaysItsWait(t *testing.T) {
	if got := "    lane_test.go:80: waited 1m2.5s for its turn in lane typhoon-dr"; testreport.LaneWait.FindStringSubmatch(got) == nil {
		t.Errorf("testreport does not read %q", got)
	}
	// Slots of its own: the package's lanes wait in the machine's for
	// this test, which runs before them.
	l := newLaneOf(newSlots(1), "lane-test", 0)
	var mu sync.Mutex
	var order []int
	t.Run("group", func(t *testing.T) {
		for i := range 4 {
			t.Run("", func(t *testing.T) {
				l.join(t)
				mu.Lock()
				defer mu.Unlock()
				if len(order) != i {
					t.Errorf("test %d started when %v had ended, want it after the %d before it", i, order, i)
				}
				order = append(order, i)
			})
		}
	})
	if len(order) != 4 || order[0] != 0 || order[1] != 1 || order[2] != 2 || order[3] != 3 {
		t.Errorf("ran in the order %v, want the order they joined", order)
	}
}

// A light lane's tests run while every slot of the machine is taken.
func TestALightLaneRunsWithoutASlot(t *testing.T) {
	full := newSlots(0)
	l := newLaneOf(full, "light-lane-test", 0)
	l.light = true
	ran := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Run("group", func(t *testing.T) {
			t.Run("", func(t *testing.T) {
				l.join(t)
				close(ran)
			})
		})
	}()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Error("the light lane's test waited for a slot of the machine")
		full.mu.Lock()
		full.n++ // let it end
		full.free.Broadcast()
		full.mu.Unlock()
	}
	<-done
}
