package integration

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"kedge.dev/kedge/integration/gobin"
	"kedge.dev/kedge/integration/lab"
	"kedge.dev/kedge/integration/testhosts"
	"kedge.dev/kedge/integration/watchdog"
	"kedge.dev/kedge/internal/codec"
	"kedge.dev/kedge/internal/devserver"
	"kedge.dev/kedge/internal/responseurl"
	"kedge.dev/kedge/runbooks/inventory"
	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/starter"
	"kedge.dev/kedge/worker"
	"kedge.dev/kedge/worker/trust"
	"kedge.dev/kedge/workflows"
)

// world is shared by every test in the package: one Temporal server, one
// in-process worker on the default task queue, a few SSH hosts.
var world struct {
	dir       string
	srv       *devserver.Server
	client    client.Client
	lab       *testhosts.Lab
	inventory string // inventory file for the lab
	codecKey  string // payload key file ($KEDGE_CODEC_KEY)
	codec     *codec.Codec
	// opener opens what the run's pending activities say (as the CLI).
	opener   runs.Opener
	kedgeBin string // the kedge binary, for tests that need a worker process
	// clusters are the inventories the in-process worker serves: every
	// inventory a test hands the CLI (workerServes, below), as an operator would
	// give the worker the inventories it runs against.
	clusters  trust.Set
	workerLog syncLog // the in-process worker's log (audit lines)
	// responseURLs are where the worker's chat.follow may post: each
	// test's receiver (newReceiver) adds its own.
	responseURLs struct {
		sync.Mutex
		prefixes []string
	}
	// cleanups run at the package's end, after every test (atWorldEnd).
	cleanupsMu sync.Mutex
	cleanups   []func()
	// teardownFailed: a shared world closed at the package's end left
	// something behind (sharedScope.Errorf): the package fails.
	teardownFailed atomic.Bool
}

// atWorldEnd has f run at the package's end (or when the watchdog ends a
// hung run), after every test; safe from tests running side by side.
func atWorldEnd(f func()) {
	world.cleanupsMu.Lock()
	defer world.cleanupsMu.Unlock()
	world.cleanups = append(world.cleanups, f)
}

// worldCleanups runs what atWorldEnd was given, in the order given.
func worldCleanups() {
	world.cleanupsMu.Lock()
	fs := world.cleanups
	world.cleanupsMu.Unlock()
	for _, f := range fs {
		f()
	}
}

const labHosts = 3

func TestMain(m *testing.M) {
	flag.Parse()
	// Every lane's tests at once (lane.join): fewer slots than lane tests
	// could leave a lane's next test waiting for a slot that tests
	// waiting for their turn in that lane hold.
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n < laneParallel {
			_ = f.Value.Set(strconv.Itoa(laneParallel))
		}
	}
	if testing.Short() {
		fmt.Println("integration: skipped in -short mode")
		os.Exit(0)
	}
	// The world's webhooks sign with secrets of their own (kedge dev
	// makes one without this); tests are parallel, so none may set the
	// environment (t.Setenv) for itself.
	os.Unsetenv("KEDGE_SLACK_SIGNING_SECRET")
	os.Unsetenv("KEDGE_SLACK_SIGNING_SECRET_FILE")
	// A hung test is named at the tail of the log, and the world torn
	// down, before -timeout's goroutine dump.
	disarm := watchdog.Start("kedge.dev/kedge/integration", os.Stderr, watchdogTeardown)
	code, err := runWorld(m)
	disarm()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration world:", err)
		os.Exit(1)
	}
	if world.teardownFailed.Load() && code == 0 {
		fmt.Fprintln(os.Stderr, "integration world: a shared world's teardown failed (above)")
		code = 1
	}
	os.Exit(code)
}

// watchdogTeardown stops what runWorld started when the watchdog ends a
// hung run (runWorld's defers never run then).
func watchdogTeardown() {
	worldCleanups()
	if world.lab != nil {
		_ = world.lab.Close()
	}
	if world.srv != nil {
		world.srv.Stop()
	}
	if world.dir != "" {
		_ = os.RemoveAll(world.dir)
	}
}

func runWorld(m *testing.M) (int, error) {
	if err := testhosts.RequireTools(); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "kedge-it-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	world.dir = dir
	ctx := context.Background()

	world.srv, err = devserver.Start(ctx, devserver.Config{DataDir: filepath.Join(dir, "temporal"), FrontendAddr: "127.0.0.1:0"})
	if err != nil {
		return 0, fmt.Errorf("start temporal: %w", err)
	}
	defer world.srv.Stop()
	// Every client and worker of the world, the CLI and `kedge worker`
	// subprocesses included, seals payloads with one key.
	// Recorded histories are sealed with the test-only key kept beside them
	// (workflows/testdata/replay), so the replay tests can open them.
	world.codecKey = filepath.Join(dir, "codec.key")
	if rec := os.Getenv("KEDGE_RECORD_HISTORY"); rec != "" {
		world.codecKey = filepath.Join(rec, "codec.key")
		_ = os.Chmod(world.codecKey, 0o600)
	}
	if _, err := os.Stat(world.codecKey); err != nil {
		if _, err := codec.Generate(world.codecKey); err != nil {
			return 0, err
		}
	}
	os.Setenv(codec.EnvKeyFile, world.codecKey)
	world.codec, err = codec.Load(world.codecKey)
	if err != nil {
		return 0, err
	}
	copts := client.Options{HostPort: world.srv.FrontendAddress(), Namespace: world.srv.Namespace(),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))}
	world.codec.Apply(&copts)
	copts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{} // as kedge on loopback
	world.client, err = client.Dial(copts)
	if err != nil {
		return 0, err
	}
	defer world.client.Close()
	world.opener = runs.Opener{Namespace: copts.Namespace, DataConverter: copts.DataConverter}
	// The worker seals what leaves it for storage (etcd snapshots) with
	// the world's codec key, as `kedge worker` and `kedge dev` do.
	w := worker.New(world.client, worker.Options{Clusters: &world.clusters, ResponseURLAllowed: worldResponseURL, DataConverter: copts.DataConverter,
		SealKeys: world.codec,
		Logger:   slog.New(slog.NewTextHandler(io.MultiWriter(os.Stderr, &world.workerLog), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err := w.Start(); err != nil {
		return 0, err
	}
	defer w.Stop()

	world.lab, err = testhosts.Start(ctx, testhosts.Options{
		Count: labHosts, Names: lab.Names(labHosts),
		BaseIP: "127.0.20.", Dir: filepath.Join(dir, "hosts"),
	})
	if err != nil {
		return 0, fmt.Errorf("start ssh hosts: %w", err)
	}
	defer world.lab.Close()
	defer worldCleanups()
	world.inventory = filepath.Join(dir, "inventory.yaml")
	if err := os.WriteFile(world.inventory, []byte(labInventory(world.lab, world.lab.KnownHostsFile)), 0o644); err != nil {
		return 0, err
	}
	if world.kedgeBin, err = gobin.Build("kedge.dev/kedge/cmd/kedge"); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

func labInventory(l *testhosts.Lab, knownHosts string) string {
	return lab.Inventory("lab", l, knownHosts)
}

// labHost is the world lab's host called name.
func labHost(t testing.TB, name string) *testhosts.Host {
	for _, h := range world.lab.Hosts {
		if h.Name == name {
			return h
		}
	}
	panic("no lab host " + name)
}

// kedge runs the real CLI in-process against the world's server.
func kedge(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), cliDeadline)
	defer cancel()
	code = mainWithServer(ctx, args, &out, &errb)
	if ctx.Err() != nil {
		t.Errorf("kedge %s: still running after %s, cancelled\nstderr: %s", strings.Join(args, " "), cliDeadline, errb.String())
	}
	return out.String(), errb.String(), code
}

// cliDeadline bounds one CLI call of a test, so a run that never ends
// fails the test that made it, by name, instead of the whole package.
const cliDeadline = 10 * time.Minute

// writeRunbook writes a runbook into the test's temp dir.
func writeRunbook(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "runbook.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runWait runs a runbook with --wait --output json and returns the final
// progress and exit code.
func runWait(t *testing.T, file string, args ...string) (workflows.Progress, int, string) {
	t.Helper()
	return runWaitInv(t, file, world.inventory, args...)
}

// runWaitInv is runWait with another inventory.
func runWaitInv(t testing.TB, file, inv string, args ...string) (workflows.Progress, int, string) {
	t.Helper()
	all := append([]string{"run", file, "--inventory", inv, "--wait", "--output", "json"}, args...)
	out, errOut, code := kedge(t, all...)
	var p workflows.Progress
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("kedge run: exit %d, no progress JSON (%v)\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	return p, code, errOut
}

func step(t *testing.T, p workflows.Progress, id string) workflows.StepProgress {
	t.Helper()
	for _, s := range p.Steps {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no step %s in %+v", id, p)
	return workflows.StepProgress{}
}

func readHostFile(t *testing.T, h, path string) string {
	t.Helper()
	data, err := labHost(t, h).ReadFile(path)
	if err != nil {
		t.Fatalf("read %s on %s: %v", path, h, err)
	}
	return string(data)
}

func hostFileExists(t *testing.T, h, path string) bool {
	t.Helper()
	_, err := labHost(t, h).ReadFile(path)
	return err == nil
}

func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

// mainWithServer runs the CLI against the world's server; safe from any
// goroutine.
func mainWithServer(ctx context.Context, args []string, out, errw *strings.Builder) int {
	for i, a := range args[:len(args)-1] {
		if a == "--inventory" && (args[0] == "run" || args[0] == "schedule" || args[0] == "inspect" || args[0] == "plan") {
			workerServes(args[i+1])
		}
	}
	full := []string{"kedge", args[0]}
	switch args[0] {
	case "run", "rerun", "watch", "list", "cancel", "approve", "schedule", "inspect", "plan":
		full = append(full, "--address", world.srv.FrontendAddress())
	}
	full = append(full, args[1:]...)
	return starter.MainContext(ctx, full, starter.IO{In: strings.NewReader(""), Out: out, Err: errw})
}

func worldResponseURL(u string) bool {
	world.responseURLs.Lock()
	defer world.responseURLs.Unlock()
	return responseurl.Allowed(world.responseURLs.prefixes, u)
}

// workerServes has the world's worker serve an inventory (replacing a cluster of
// the same name). One that does not load is left for the CLI to refuse.
func workerServes(inv string) {
	if c, err := inventory.LoadFile(inv); err == nil {
		world.clusters.Put(c)
	}
}

// queryProgress reads a run's progress as the CLI does: the workflow's
// query, with the attempts Temporal is making of its actions and their
// last failures.
func queryProgress(id string) (workflows.Progress, error) {
	return runs.Progress(context.Background(), world.client, world.opener, id, "")
}
