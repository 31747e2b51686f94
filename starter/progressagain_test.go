package starter

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"kedge.dev/kedge/workflows"
)

// slowWorker is a Temporal client whose progress queries time out until
// the worker has answered fails of them.
type slowWorker struct {
	client.Client
	fails, asked int
}

func (s *slowWorker) QueryWorkflow(ctx context.Context, id, runID, query string, args ...any) (converter.EncodedValue, error) {
	s.asked++
	if s.asked <= s.fails {
		return nil, context.DeadlineExceeded
	}
	b, _ := json.Marshal(workflows.Progress{State: workflows.StateSucceeded})
	return jsonValue(b), nil
}

type jsonValue []byte

func (v jsonValue) HasValue() bool         { return len(v) > 0 }
func (v jsonValue) Get(valuePtr any) error { return json.Unmarshal(v, valuePtr) }

// An ended run's progress is asked for again while a busy worker does not
// answer (the run --wait --output json that printed nothing and exited 0
// on a loaded machine), and an answer that never comes is an error.
func TestProgressAgainOutwaitsABusyWorker(t *testing.T) {
	defer func(f, e time.Duration) { busyReadFor, busyReadEvery = f, e }(busyReadFor, busyReadEvery)
	busyReadFor, busyReadEvery = 5*time.Second, time.Millisecond
	cl := &slowWorker{fails: 3}
	p, err := progressAgain(t.Context(), cl, "rb/c/1", "", context.DeadlineExceeded)
	if err != nil || p.State != workflows.StateSucceeded {
		t.Fatalf("after 3 timeouts: %+v %v", p, err)
	}
	busyReadFor = 20 * time.Millisecond
	_, err = progressAgain(t.Context(), &slowWorker{fails: 1 << 30}, "rb/c/1", "", context.DeadlineExceeded)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a worker that never answers: %v", err)
	}
	refused := &slowWorker{fails: 1 << 30}
	if _, err := progressAgain(t.Context(), refused, "rb/c/1", "", errors.New("workflow not found")); err == nil || refused.asked != 0 {
		t.Errorf("a run not found was asked again %d times: %v", refused.asked, err)
	}
	if got := endedAs(errors.New("boom")); !strings.HasPrefix(got, "failed: boom") {
		t.Errorf("endedAs: %q", got)
	}
}
