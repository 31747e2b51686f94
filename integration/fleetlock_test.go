package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/chatops"
	"kedge.dev/kedge/fleetlock"
	"kedge.dev/kedge/integration/fleetlockclient"
	"kedge.dev/kedge/workflows"
)

// fleetLockKey is the key the five-worker cluster's node tokens are
// derived from.
const fleetLockKey = "fleetlock-it-key-0123456789abcdef"

// startFleetLock serves `kedge webhook` with a FleetLock endpoint of one
// slot for the five-worker cluster, its inventory given a fleetLockId for
// each worker ("zincati-NODE"); settings are more fields of the config's
// fleetLock section ("lostAfter: 8s"). It returns the server's URL and
// log.
func startFleetLock(t *testing.T, inv, settings string) (string, *syncLog) {
	t.Helper()
	dir := t.TempDir()
	text, err := os.ReadFile(inv)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	for i, l := range lines {
		if name, ok := strings.CutPrefix(strings.TrimSpace(l), "- name: "); ok && strings.HasPrefix(name, "five-worker-") {
			lines[i] = l + "\n    fleetLockId: zincati-" + name
		}
	}
	withIDs := filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(withIDs, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	workerServes(withIDs)
	if err := os.WriteFile(filepath.Join(dir, "fleetlock.key"), []byte(fleetLockKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`apiVersion: kedge/v1
kind: ChatOps
clusters:
  five:
    inventory: %s
    fleetLock: {keyFile: fleetlock.key, slots: 1%s}
allow: []
`, withIDs, settings)
	if err := os.WriteFile(filepath.Join(dir, "chatops.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := chatops.LoadConfig(filepath.Join(dir, "chatops.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncLog{}
	srv := &chatops.Server{Config: c, Client: world.client, DataConverter: world.codec.DataConverter(),
		Namespace: world.srv.Namespace(), Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	t.Cleanup(func() {
		_ = world.client.TerminateWorkflow(context.Background(), workflows.FleetLockWorkflowID("five"), "", "test over")
	})
	return serveWebhook(t, srv, logs) + chatops.FleetLockPrefix, logs
}

// Two self-updating nodes ask to reboot at once with one slot: one is
// granted only once Kedge has cordoned and drained it, the other waits
// (and is not cordoned) until the first reports steady-state, which
// uncordons it and frees the slot. Requests without the node's token, for
// a node the inventory does not have, or with another node's client ID
// are refused, Kedge not asked, and each is audited.
func TestFleetLockGrantsOneSlotAfterTheDrain(t *testing.T) {
	mainLane.join(t)
	cp, _, inv, workers := fiveWorkers(t)
	base, logs := startFleetLock(t, inv, "")
	key := []byte(fleetLockKey)
	clients := map[string]*fleetlockclient.Client{}
	for _, n := range workers[:2] {
		c, err := fleetlockclient.New(fleetlock.BaseURL(base, "five", n, fleetlock.Token(key, "five", n)), "zincati-"+n, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SteadyState(t.Context()); err != nil {
			t.Fatalf("%s steady-state at start: %v", n, err)
		}
		if err := c.UpdateStaged(); err != nil {
			t.Fatal(err)
		}
		clients[n] = c
	}
	t.Cleanup(func() {
		for _, n := range workers[:2] {
			patch := []byte(`{"spec":{"unschedulable":false}}`)
			_, _ = cp.Client.CoreV1().Nodes().Patch(context.Background(), n, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		}
	})

	// Both ask at once; the first granted holds the slot.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	granted := make(chan string, 2)
	var wg sync.WaitGroup
	for n, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.LockUntilGranted(ctx, 300*time.Millisecond); err == nil {
				granted <- n
			}
		}()
	}
	first := <-granted
	other := workers[0]
	if first == other {
		other = workers[1]
	}
	node := func(n string) bool {
		got, err := cp.Client.CoreV1().Nodes().Get(t.Context(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Spec.Unschedulable
	}
	if !node(first) {
		t.Fatalf("%s was granted its reboot while schedulable", first)
	}
	// The other keeps asking and is told why it waits; it is not touched.
	eventually(t, 30*time.Second, other+" told the slot is held", func() bool {
		return strings.Contains(logs.String(), `"node":"`+other+`"`) && strings.Contains(logs.String(), "all 1 slots are held")
	})
	if node(other) {
		t.Fatalf("%s was cordoned while %s holds the only slot", other, first)
	}
	select {
	case n := <-granted:
		t.Fatalf("%s was granted while %s holds the only slot", n, first)
	default:
	}

	// The first reboots and reports steady-state: uncordoned, slot free.
	if err := clients[first].Reboot(); err != nil {
		t.Fatal(err)
	}
	if err := clients[first].UnlockUntilAcknowledged(ctx, 300*time.Millisecond); err != nil {
		t.Fatalf("%s steady-state after its reboot: %v", first, err)
	}
	if node(first) {
		t.Errorf("%s is still cordoned after its steady-state", first)
	}
	select {
	case n := <-granted:
		if n != other {
			t.Fatalf("granted %s again", n)
		}
	case <-ctx.Done():
		t.Fatalf("%s never granted after %s freed the slot", other, first)
	}
	wg.Wait()
	if !node(other) {
		t.Errorf("%s granted while schedulable", other)
	}

	// The attacker's requests.
	for _, a := range []struct {
		name, url, id, want string
		status              int
	}{
		{"no token", base + "five/" + workers[2] + "/v1/pre-reboot", "zincati-" + workers[2], "failed_auth", 401},
		{"another node's token", fleetlock.BaseURL(base, "five", workers[2], fleetlock.Token(key, "five", workers[3])) + "v1/pre-reboot", "zincati-" + workers[2], "failed_auth", 401},
		{"a node not in the inventory", fleetlock.BaseURL(base, "five", "ghost", fleetlock.Token(key, "five", "ghost")) + "v1/pre-reboot", "zincati-ghost", "unknown_node", 403},
		{"another node's client ID", fleetlock.BaseURL(base, "five", workers[2], fleetlock.Token(key, "five", workers[2])) + "v1/pre-reboot", "zincati-" + workers[3], "unknown_node", 403},
	} {
		before := strings.Count(logs.String(), `"audit":true`)
		req, _ := http.NewRequest("POST", a.url, bytes.NewReader([]byte(`{"client_params":{"id":"`+a.id+`","group":"default"}}`)))
		req.Header.Set("fleet-lock-protocol", "true")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != a.status || !strings.Contains(string(body), a.want) {
			t.Errorf("%s: %d %s; want %d %s", a.name, resp.StatusCode, body, a.status, a.want)
		}
		if after := strings.Count(logs.String(), `"audit":true`); after != before+1 {
			t.Errorf("%s: %d audit lines, want 1", a.name, after-before)
		}
	}
	if node(workers[2]) {
		t.Errorf("%s cordoned by a refused request", workers[2])
	}
	if strings.Contains(logs.String(), fleetlock.Token(key, "five", workers[0])) {
		t.Error("a token reached the log")
	}
}

// A node granted its reboot that never reports steady-state keeps its
// slot past lostAfter, the coordinator shows itself waiting for a person,
// and the next node asking waits. An operator frees the slot with `kedge
// approve fleetlock/five --step NODE --decision release`: the lost node,
// Ready, is uncordoned, and the next node takes the slot and is granted
// once drained. Refused, the slot kept: a release of a node not lost yet
// or holding no slot (through the CLI, and sent to the coordinator
// directly with a nonce of its own making), and the operator's release
// sent again (the nonce of a wait that has ended).
func TestFleetLockReleasesALostNodeThroughTheCLI(t *testing.T) {
	mainLane.join(t)
	cp, _, inv, workers := fiveWorkers(t)
	base, logs := startFleetLock(t, inv, ", lostAfter: 8s, drainTimeout: 1m")
	key := []byte(fleetLockKey)
	lost, next := workers[2], workers[3]
	id := workflows.FleetLockWorkflowID("five")
	newClient := func(n string) *fleetlockclient.Client {
		c, err := fleetlockclient.New(fleetlock.BaseURL(base, "five", n, fleetlock.Token(key, "five", n)), "zincati-"+n, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SteadyState(t.Context()); err != nil {
			t.Fatalf("%s steady-state at start: %v", n, err)
		}
		if err := c.UpdateStaged(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Cleanup(func() {
		for _, n := range []string{lost, next} {
			patch := []byte(`{"spec":{"unschedulable":false}}`)
			_, _ = cp.Client.CoreV1().Nodes().Patch(context.Background(), n, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		}
	})
	cordoned := func(n string) bool {
		got, err := cp.Client.CoreV1().Nodes().Get(t.Context(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Spec.Unschedulable
	}
	// release sends a release decision to the coordinator directly, as
	// a client of Temporal that skips the CLI's checks would.
	release := func(d workflows.Decision) error {
		d.Decision, d.By = workflows.FleetLockDecisionRelease, "mallory"
		h, err := world.client.UpdateWorkflow(t.Context(), client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: workflows.DecideUpdate,
			Args: []any{d}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err != nil {
			return err
		}
		return h.Get(t.Context(), nil)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// The first node is drained, granted, and goes quiet.
	first := newClient(lost)
	began := time.Now()
	if err := first.LockUntilGranted(ctx, 300*time.Millisecond); err != nil {
		t.Fatalf("%s never granted: %v", lost, err)
	}
	granted := time.Now()
	t.Logf("%s granted after %s", lost, granted.Sub(began).Round(time.Millisecond))
	if err := first.Reboot(); err != nil {
		t.Fatal(err)
	}
	// Not lost yet: a release is refused by the CLI and by the coordinator.
	if out, errOut, code := kedge(t, "approve", id, "--step", lost, "--decision", "release"); code == 0 || !strings.Contains(errOut, "not waiting") {
		t.Errorf("release of %s while it reboots: exit %d: %s %s", lost, code, out, errOut)
	}
	p, err := queryProgress(id)
	if err != nil {
		t.Fatal(err)
	}
	forged := workflows.Decision{Step: lost, WorkflowID: p.WorkflowID, RunID: p.RunID, Nonce: "rebooting/1"}
	if err := release(forged); err == nil || !strings.Contains(err.Error(), "holds no slot waiting for a person") {
		t.Errorf("a release of %s, not lost, sent to the coordinator: %v", lost, err)
	}
	if time.Since(granted) > 8*time.Second {
		t.Fatalf("the checks of a node not lost yet took %s, past lostAfter: the test is too slow for its own settings", time.Since(granted))
	}

	// The next node asks and waits while the first is lost.
	second := newClient(next)
	nextGranted := make(chan error, 1)
	go func() { nextGranted <- second.LockUntilGranted(ctx, 300*time.Millisecond) }()
	eventually(t, 60*time.Second, lost+" lost and "+next+" told so", func() bool {
		return strings.Contains(logs.String(), "all 1 slots are held: "+lost+" (lost)")
	})
	p, err = queryProgress(id)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != workflows.StateWaiting || len(p.Steps) != 1 || p.Steps[0].ID != lost || p.Steps[0].Action != workflows.LockLost {
		t.Fatalf("the coordinator with %s lost: %+v", lost, p)
	}
	if !cordoned(lost) || cordoned(next) {
		t.Fatalf("%s cordoned %v (want true), %s cordoned %v (want false)", lost, cordoned(lost), next, cordoned(next))
	}
	if out, errOut, code := kedge(t, "approve", id, "--step", next, "--decision", "release"); code == 0 || !strings.Contains(errOut, "has no step") {
		t.Errorf("release of %s, which holds no slot: exit %d: %s %s", next, code, out, errOut)
	}
	if err := release(workflows.Decision{Step: lost, WorkflowID: p.WorkflowID, RunID: p.RunID, Nonce: p.Steps[0].Nonce + "0"}); err == nil || !strings.Contains(err.Error(), "another wait") {
		t.Errorf("a release of %s with a nonce not its wait's: %v", lost, err)
	}
	stale, err := workflows.BindDecision(workflows.Decision{Step: lost}, p)
	if err != nil {
		t.Fatal(err)
	}

	// The operator frees the slot.
	out, errOut, code := kedge(t, "approve", id, "--step", lost, "--decision", "release", "--by", "alice")
	if code != 0 || !strings.Contains(out, lost+"'s slot released by alice") {
		t.Fatalf("kedge approve --decision release: exit %d: %s %s", code, out, errOut)
	}
	eventually(t, 60*time.Second, lost+" uncordoned after its release", func() bool { return !cordoned(lost) })
	select {
	case err := <-nextGranted:
		if err != nil {
			t.Fatalf("%s after %s's release: %v", next, lost, err)
		}
	case <-ctx.Done():
		t.Fatalf("%s never granted after %s's release", next, lost)
	}
	if !cordoned(next) {
		t.Errorf("%s granted while schedulable", next)
	}
	// The same release again: its wait has ended.
	if err := release(stale); err == nil || !strings.Contains(err.Error(), "holds no slot waiting for a person") {
		t.Errorf("the release of %s sent again: %v", lost, err)
	}
	p, err = queryProgress(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 1 || p.Steps[0].ID != next {
		t.Errorf("after the release, the slot is %+v, want %s's", p.Steps, next)
	}
}
