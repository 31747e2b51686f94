package codec

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"kedge.dev/kedge/actions/errtype"
)

func queueCtx(id, activity, queue string) converter.SerializationContext {
	return converter.ActivitySerializationContext{Namespace: "default", WorkflowID: id, WorkflowType: "runbook", ActivityType: activity, TaskQueue: queue}
}

// queueKeyFile derives queue's key file from the full one at full.
func queueKeyFile(t *testing.T, full *Codec, queue string) (string, *Codec) {
	t.Helper()
	var b bytes.Buffer
	if err := full.WriteQueueKeys(&b, queue); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), queue+".key")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Queue() != queue {
		t.Fatalf("queue key file for %s loads as queue %q", queue, c.Queue())
	}
	return path, c
}

// A site's worker, taken over, holds its queue's key file (lyon) and
// answers the tasks of another site's queue (paris) with results of its
// choosing: none opens where the workflow reads paris' results. It can
// still answer its own queue's activities, and read nothing else.
func TestAQueueKeyVouchesForItsOwnQueueOnly(t *testing.T) {
	_, full := newKeyFile(t)
	_, lyon := queueKeyFile(t, full, "lyon")
	const run, step = "etcd-snapshot/mercury/20261202-1", "etcd.health"
	forged := map[string]any{"healthy": true, "members": 3}

	// Its own queue's work: the workflow (full key) and the lyon worker
	// each open what the other sealed.
	in := seal(t, full, queueCtx(run, step, "lyon"), "check lyon")
	if v, err := open(lyon, queueCtx(run, step, "lyon"), in); err != nil || v != "check lyon" {
		t.Fatalf("lyon's worker opening lyon's input: %q %v", v, err)
	}
	res := seal(t, lyon, queueCtx(run, step, "lyon"), "done")
	if v, err := open(full, queueCtx(run, step, "lyon"), res); err != nil || v != "done" {
		t.Fatalf("the workflow opening lyon's result: %q %v", v, err)
	}

	// A result sealed as lyon's, answered for paris' activity: refused.
	fromLyon, err := converter.WithDataConverterSerializationContext(lyon.DataConverter(), queueCtx(run, step, "lyon")).ToPayload(forged)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := converter.WithDataConverterSerializationContext(full.DataConverter(), queueCtx(run, step, "paris")).FromPayload(fromLyon, &got); !errors.Is(err, ErrMisbound) {
		t.Errorf("lyon's result as paris' opened: %v %v", got, err)
	}
	// Sealing as paris' takes paris' key, which lyon does not hold.
	if _, err := converter.WithDataConverterSerializationContext(lyon.DataConverter(), queueCtx(run, step, "paris")).ToPayload(forged); !errors.Is(err, ErrQueueKey) {
		t.Errorf("lyon sealing as paris: %v", err)
	}
	// Nor does relabelling help: paris' binding on lyon's seal does not
	// open with paris' key.
	relabelled := proto.Clone(fromLyon).(*commonpb.Payload)
	relabelled.Metadata[MetadataBinding] = []byte(`["activity","default","` + run + `","` + step + `","paris"]`)
	if err := converter.WithDataConverterSerializationContext(full.DataConverter(), queueCtx(run, step, "paris")).FromPayload(relabelled, &got); err == nil {
		t.Errorf("a lyon seal relabelled as paris' opened: %v", got)
	}

	// lyon reads no workflow's input, no other queue's activity input.
	wf := seal(t, full, wfCtx(run), "params")
	if _, err := open(lyon, wfCtx(run), wf); !errors.Is(err, ErrQueueKey) {
		t.Errorf("lyon opening a workflow's input: %v", err)
	}
	paris := seal(t, full, queueCtx(run, step, "paris"), "paris' secret")
	if _, err := open(lyon, queueCtx(run, step, "paris"), paris); !errors.Is(err, ErrQueueKey) {
		t.Errorf("lyon opening paris' input: %v", err)
	}
	// nor what the full key sealed before queue keys.
	legacy := seal(t, full, actCtx(run, step), "old")
	legacy.Metadata[MetadataBinding] = []byte(`["activity","default","` + run + `","` + step + `"]`)
	if _, err := open(lyon, queueCtx(run, step, "lyon"), legacy); err == nil {
		t.Errorf("lyon opened a payload the full key sealed")
	}
	// and it seals no workflow payload (a start, a signal).
	if _, err := converter.WithDataConverterSerializationContext(lyon.DataConverter(), wfCtx(run)).ToPayload("start"); !errors.Is(err, ErrQueueKey) {
		t.Errorf("lyon sealing a workflow's input: %v", err)
	}
}

// What the full key sealed before queue keys (activity bindings without a
// queue) still opens in the runs in flight when workers are upgraded.
func TestActivityPayloadsSealedBeforeQueueKeysOpen(t *testing.T) {
	_, full := newKeyFile(t)
	const run, step = "node-join/mercury/20261201-1", "host.run"
	old := *full
	old.bind = &binding{Kind: "activity", Namespace: "default", Workflow: run, Activity: step}
	sealed, err := old.Encode([]*commonpb.Payload{mustPayload(t, "from before")})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := open(full, queueCtx(run, step, "kedge"), sealed[0]); err != nil || v != "from before" {
		t.Errorf("a pre-queue-key payload: %q %v", v, err)
	}
}

func mustPayload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// An etcd snapshot a site's worker seals names its queue's key; the full
// key file opens it, another queue's does not.
func TestSnapshotKeysOfAQueue(t *testing.T) {
	_, full := newKeyFile(t)
	_, lyon := queueKeyFile(t, full, "lyon")
	_, paris := queueKeyFile(t, full, "paris")
	id := lyon.ActiveKey()
	if !strings.HasSuffix(id, "/lyon") {
		t.Fatalf("lyon's snapshot key id %q", id)
	}
	a, err := lyon.AEAD(id)
	if err != nil {
		t.Fatal(err)
	}
	nonce := make([]byte, a.NonceSize())
	_, _ = rand.Read(nonce)
	sealed := a.Seal(nil, nonce, []byte("snapshot"), nil)
	b, err := full.AEAD(id)
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := b.Open(nil, nonce, sealed, nil); err != nil || string(plain) != "snapshot" {
		t.Errorf("the full key opening lyon's snapshot: %q %v", plain, err)
	}
	if _, err := paris.AEAD(id); !errors.Is(err, ErrQueueKey) {
		t.Errorf("paris' key file asked for lyon's key: %v", err)
	}
}

// A key file holds full keys or one queue's, and says where it does not.
func TestQueueKeyFilesAreOneQueueEach(t *testing.T) {
	dir := t.TempDir()
	k := "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	for name, c := range map[string]struct{ text, want string }{
		"mixed":      {"a " + k + "\nb/lyon " + k + "\n", "mixed:2: key b: a key file holds full keys or one task queue's keys, not both"},
		"two queues": {"a/lyon " + k + "\nb/paris " + k + "\n", "two queues:2: key b is task queue paris's, the file's first is lyon's"},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	_, lyon := queueKeyFile(t, mustFull(t), "lyon")
	if err := lyon.WriteQueueKeys(&bytes.Buffer{}, "paris"); !errors.Is(err, ErrQueueKey) {
		t.Errorf("deriving paris' keys from lyon's: %v", err)
	}
}

func mustFull(t *testing.T) *Codec {
	_, c := newKeyFile(t)
	return c
}

// A site's worker reports its activity's error sealed with its queue's
// key, and the workflow reads the message in that activity's context
// (before, the error was sealed outside any context, which a queue key
// file cannot: the worker panicked on every failed step).
func TestASitesWorkerReportsItsActivitysError(t *testing.T) {
	_, full := newKeyFile(t)
	_, lyon := queueKeyFile(t, full, "lyon")
	ctx := queueCtx("sites/lab/20261202-1", "host.run", "lyon")
	var site, wf client.Options
	lyon.Apply(&site)
	full.Apply(&wf)
	f := converter.WithFailureConverterSerializationContext(site.FailureConverter, ctx).ErrorToFailure(errors.New("exit status 3 on worker-2"))
	if f.GetMessage() == "exit status 3 on worker-2" || f.GetEncodedAttributes() == nil {
		t.Fatalf("the message is not sealed: %v", f)
	}
	err := converter.WithFailureConverterSerializationContext(wf.FailureConverter, ctx).FailureToError(f)
	if err == nil || !strings.Contains(err.Error(), "exit status 3 on worker-2") {
		t.Errorf("the workflow reads %v", err)
	}
}

// A site's worker, taken over, answers another site's step (paris) with
// a failure of its choosing, non-retryable so the step fails and its
// undo starts: made with its own queue's key, without any key, or as the
// cause of a failure the server would make. The workflow reads none of
// them as the step's failure; it reads Paris' own failures and the
// server's timeouts as they are.
func TestASitesWorkerCannotFailAnotherSitesStep(t *testing.T) {
	_, full := newKeyFile(t)
	_, lyon := queueKeyFile(t, full, "lyon")
	_, paris := queueKeyFile(t, full, "paris")
	const run = "etcd-backup/prod/20261203-1"
	var lyonOpts, parisOpts, wf client.Options
	lyon.Apply(&lyonOpts)
	paris.Apply(&parisOpts)
	full.Apply(&wf)
	parisStep := queueCtx(run, "etcd.check-quorum", "paris")
	forged := temporal.NewNonRetryableApplicationError("quorum lost", "CheckFailed", nil)
	read := converter.WithFailureConverterSerializationContext(wf.FailureConverter, parisStep)

	withLyonsKey := converter.WithFailureConverterSerializationContext(lyonOpts.FailureConverter, queueCtx(run, "etcd.check-quorum", "lyon")).ErrorToFailure(forged)
	keyless := temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{}).ErrorToFailure(forged)
	serverTimeout := &failurepb.Failure{
		Message:     "activity StartToClose timeout",
		FailureInfo: &failurepb.Failure_TimeoutFailureInfo{TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{TimeoutType: enumspb.TIMEOUT_TYPE_START_TO_CLOSE}},
	}
	wrapped := proto.Clone(serverTimeout).(*failurepb.Failure)
	wrapped.Cause = keyless
	for name, f := range map[string]*failurepb.Failure{
		"sealed with lyon's key": withLyonsKey,
		"not sealed":             keyless,
		"under a server timeout": wrapped,
	} {
		err := read.FailureToError(f)
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || !errtype.Is(err, errtype.RefusedFailure) || app.NonRetryable() || strings.Contains(err.Error(), "quorum lost") {
			t.Errorf("%s: the workflow reads %v, want a retryable RefusedFailure that does not repeat the forged message", name, err)
		}
	}

	own := converter.WithFailureConverterSerializationContext(parisOpts.FailureConverter, parisStep).ErrorToFailure(forged)
	var app *temporal.ApplicationError
	if err := read.FailureToError(own); !errors.As(err, &app) || !errtype.Is(err, errtype.CheckFailed) || !app.NonRetryable() || !strings.Contains(err.Error(), "quorum lost") {
		t.Errorf("paris' own failure reads %v", err)
	}
	var timeout *temporal.TimeoutError
	if err := read.FailureToError(serverTimeout); !errors.As(err, &timeout) {
		t.Errorf("the server's timeout reads %v", err)
	}
}
