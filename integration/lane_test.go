package integration

import (
	"sync"
	"testing"
	"time"

	"kedge.dev/kedge/internal/testreport"
)

// A lane is a line of tests that share what no two of them may use at
// once: a world they build once (the Typhoon cluster, the real kubelets'
// cluster), or the addresses every world of their kind binds (the
// disaster-recovery worlds, one per test). A lane's tests run one at a
// time, in the order of the source (the order `go test` starts them),
// while the other lanes' tests run beside them: a lane's test is
// parallel (t.Parallel), so every lane starts once the package's tests
// outside any lane are over (the bootstrapped cluster, which binds
// :6443 on every address, among them).
//
// Most of what these tests do is wait on servers (static pods restarting,
// etcd members catching up, kubelets rotating), so lanes side by side
// fill the machine's idle time.
type lane struct {
	name string

	mu      sync.Mutex
	turn    *sync.Cond
	tickets int // handed out, in source order
	serving int // the ticket whose test runs now
}

// The package's lanes. A world's IP range belongs to one lane.
var (
	// realLane: the real kubelets' cluster (realSharedCluster).
	realLane = newLane("real-kubelets")
	// typhoonLane: the shared Typhoon world (typhoonWorld), 127.0.45.x.
	typhoonLane = newLane("typhoon")
	// typhoonDRLane: a disaster-recovery Typhoon world per test
	// (typhoonDRWorld), 127.0.47.x.
	typhoonDRLane = newLane("typhoon-dr")
	// kedgeHALane: a Kedge HA world per test (kedgeHAWorld), 127.0.61.x.
	kedgeHALane = newLane("kedge-ha")
)

// laneParallel is the package's -test.parallel: every lane's tests at
// once (each waits for its turn in its lane, holding a slot meanwhile),
// so that one lane's queue never keeps another lane from running.
const laneParallel = 64

func newLane(name string) *lane {
	l := &lane{name: name}
	l.turn = sync.NewCond(&l.mu)
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

	t.Parallel()
	began := time.Now()
	l.mu.Lock()
	for l.serving != ticket {
		l.turn.Wait()
	}
	l.mu.Unlock()
	// Registered first, so it runs last: the next test starts after this
	// one's cleanups (a world's teardown among them).
	t.Cleanup(func() {
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
	l := newLane("lane-test")
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
