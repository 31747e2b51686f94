package codec

import (
	"errors"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

func wfCtx(id string) converter.SerializationContext {
	return converter.WorkflowSerializationContext{Namespace: "default", WorkflowID: id}
}

func actCtx(id, activity string) converter.SerializationContext {
	return converter.ActivitySerializationContext{Namespace: "default", WorkflowID: id, WorkflowType: "runbook", ActivityType: activity, TaskQueue: "kedge"}
}

// seal is what a key holder's client or worker puts into Temporal in ctx.
func seal(t *testing.T, c *Codec, ctx converter.SerializationContext, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.WithDataConverterSerializationContext(c.DataConverter(), ctx).ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func open(c *Codec, ctx converter.SerializationContext, p *commonpb.Payload) (string, error) {
	var v string
	err := converter.WithDataConverterSerializationContext(c.DataConverter(), ctx).FromPayload(p, &v)
	return v, err
}

// An attacker without the key copies sealed payloads from a run's history
// into other places: every move is refused; only where it was sealed for
// does it open.
func TestASealedPayloadOpensOnlyWhereItWasSealedFor(t *testing.T) {
	_, c := newKeyFile(t)
	input := seal(t, c, wfCtx("hello/lab/20261126-1"), "run me")
	if v, err := open(c, wfCtx("hello/lab/20261126-1"), input); err != nil || v != "run me" {
		t.Fatalf("in its own workflow: %q %v", v, err)
	}
	for name, ctx := range map[string]converter.SerializationContext{
		"another workflow ID":          wfCtx("hello/lab/20261126-2"),
		"another namespace":            converter.WorkflowSerializationContext{Namespace: "prod", WorkflowID: "hello/lab/20261126-1"},
		"an activity of that workflow": actCtx("hello/lab/20261126-1", "host.run"),
		"a scheduled-looking ID":       wfCtx("hello/lab/20261126-1-x"),
	} {
		if _, err := open(c, ctx, input); !errors.Is(err, ErrMisbound) {
			t.Errorf("workflow input opened in %s: %v", name, err)
		}
	}
	result := seal(t, c, actCtx("hello/lab/20261126-1", "host.preflight"), "ok")
	if _, err := open(c, actCtx("hello/lab/20261126-1", "host.run"), result); !errors.Is(err, ErrMisbound) {
		t.Errorf("an activity result opened as another activity's: %v", err)
	}
	if _, err := open(c, actCtx("hello/lab/20261126-2", "host.preflight"), result); !errors.Is(err, ErrMisbound) {
		t.Errorf("an activity result opened in another workflow: %v", err)
	}
	// The binding is authenticated: rewriting it in the metadata breaks the seal.
	forged := seal(t, c, wfCtx("a"), "x")
	forged.Metadata[MetadataBinding] = []byte(`["workflow","default","b"]`)
	if _, err := open(c, wfCtx("b"), forged); err == nil {
		t.Error("a payload whose binding was rewritten opened")
	}
}

// A payload sealed with no context (before bindings, or by a client that
// gave none) does not open in a context unless the worker accepts unbound
// payloads for an upgrade; the Web UI's viewer opens everything.
func TestUnboundPayloadsOpenInAContextOnlyWhenAccepted(t *testing.T) {
	_, c := newKeyFile(t)
	unbound, err := c.DataConverter().ToPayload("old")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open(c, wfCtx("w"), unbound); !errors.Is(err, ErrUnbound) {
		t.Errorf("an unbound payload in a workflow: %v", err)
	}
	if v, err := open(c.AcceptUnbound(), wfCtx("w"), unbound); err != nil || v != "old" {
		t.Errorf("accepted for an upgrade: %q %v", v, err)
	}
	bound := seal(t, c, wfCtx("w"), "new")
	var v string
	if err := c.DataConverter().FromPayload(bound, &v); err != nil || v != "new" {
		t.Errorf("a bound payload read without a context (memo, CLI): %q %v", v, err)
	}
	if out, err := (viewer{c}).Decode([]*commonpb.Payload{bound}); err != nil || len(out) != 1 {
		t.Errorf("the Web UI's codec server: %v", err)
	}
}

// A schedule's action is sealed once, bound to the schedule's ID and the
// action's workflow ID; each run the schedule starts is that ID, "-" and
// the nominal time. Only such a payload opens under a suffixed ID: a
// run's own input copied under its ID and a time does not.
func TestAScheduledRunOpensItsSchedulesActionOnly(t *testing.T) {
	_, c := newKeyFile(t)
	action, err := c.SealScheduleAction("default", "nightly-renewal", "cert-renewal/lab/scheduled", "renew")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := open(c, wfCtx("cert-renewal/lab/scheduled-2026-11-26T03:00:00Z"), action); err != nil || v != "renew" {
		t.Errorf("a scheduled run: %q %v", v, err)
	}
	for name, ctx := range map[string]converter.SerializationContext{
		"a suffix that is no time": wfCtx("cert-renewal/lab/scheduled-now"),
		"the action's bare ID":     wfCtx("cert-renewal/lab/scheduled"),
		"another namespace":        converter.WorkflowSerializationContext{Namespace: "prod", WorkflowID: "cert-renewal/lab/scheduled-2026-11-26T03:00:00Z"},
		"an activity of a run":     actCtx("cert-renewal/lab/scheduled-2026-11-26T03:00:00Z", "host.run"),
		"another runbook's run":    wfCtx("etcd-restore/lab/scheduled-2026-11-26T03:00:00Z"),
		"a run of another cluster": wfCtx("cert-renewal/prod/scheduled-2026-11-26T03:00:00Z"),
	} {
		if _, err := open(c, ctx, action); !errors.Is(err, ErrMisbound) {
			t.Errorf("the action opened in %s: %v", name, err)
		}
	}
	// What an attacker without the key does with a run started from the
	// CLI, chat or a webhook: start its input again under its ID and a
	// time, the shape of a scheduled run's ID.
	input := seal(t, c, wfCtx("cert-renewal/lab/20261126-030000-ab12"), "renew")
	if _, err := open(c, wfCtx("cert-renewal/lab/20261126-030000-ab12-2026-11-26T03:05:00Z"), input); !errors.Is(err, ErrMisbound) {
		t.Errorf("a run's input opened under its ID and a time: %v", err)
	}
	// Schedule actions sealed before they were bound to their schedule
	// open in their runs only while a worker accepts pre-upgrade payloads.
	old := seal(t, c, wfCtx("cert-renewal/lab/scheduled"), "renew")
	if _, err := open(c, wfCtx("cert-renewal/lab/scheduled-2026-11-26T03:00:00Z"), old); !errors.Is(err, ErrMisbound) {
		t.Errorf("a schedule action sealed before the binding opened: %v", err)
	}
	if _, err := open(c.AcceptUnbound(), wfCtx("cert-renewal/lab/scheduled-2026-11-26T03:00:00Z"), old); err != nil {
		t.Errorf("a pre-upgrade schedule action with --accept-unbound-payloads: %v", err)
	}
	// The schedule's ID is sealed with the rest: rewriting it breaks the seal.
	forged := proto.Clone(action).(*commonpb.Payload)
	forged.Metadata[MetadataBinding] = []byte(`["schedule","default","cert-renewal/lab/scheduled","other"]`)
	if _, err := open(c, wfCtx("cert-renewal/lab/scheduled-2026-11-26T03:00:00Z"), forged); err == nil {
		t.Error("an action whose schedule ID was rewritten opened")
	}
}

// A history recorded in namespace default replays in the SDK's own
// namespace: with ReplayedIn("default") its payloads open there, and only
// those sealed for default; a codec not told so opens none of them.
func TestAReplayedHistoryOpensAsRecorded(t *testing.T) {
	_, c := newKeyFile(t)
	input := seal(t, c, wfCtx("hello/lab/20261126-1"), "run me")
	prod := seal(t, c, converter.WorkflowSerializationContext{Namespace: "prod", WorkflowID: "hello/lab/20261126-1"}, "run me")
	replay := converter.WorkflowSerializationContext{Namespace: sdkReplayNamespace, WorkflowID: "hello/lab/20261126-1"}
	if _, err := open(c, replay, input); !errors.Is(err, ErrMisbound) {
		t.Errorf("opened in the replayer without ReplayedIn: %v", err)
	}
	r := c.ReplayedIn("default")
	if v, err := open(r, replay, input); err != nil || v != "run me" {
		t.Errorf("replayed as recorded in default: %q %v", v, err)
	}
	if _, err := open(r, replay, prod); !errors.Is(err, ErrMisbound) {
		t.Errorf("a payload sealed for prod opened in a replay of default: %v", err)
	}
	if _, err := open(r, converter.WorkflowSerializationContext{Namespace: "prod", WorkflowID: "hello/lab/20261126-1"}, input); !errors.Is(err, ErrMisbound) {
		t.Errorf("ReplayedIn moved a payload of default to prod outside the replayer: %v", err)
	}
}
