package resume

import (
	"context"
	"errors"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Header is the activity task header that carries the details.
const Header = "kedge-resume"

// carriedKey holds, on a workflow context, the details to send with the
// next activity (*commonpb.Payloads) and, on an activity context, those
// received (carried).
type carriedKey struct{}

// After returns the context for the attempt that follows the one that
// ended in err. When err is a heartbeat timeout whose attempt heartbeated,
// the context carries its last details, as sealed as they came. Otherwise
// ctx is returned as it is: an attempt lost before its first heartbeat
// passes on what it was given.
func After(ctx workflow.Context, err error) workflow.Context {
	var timeout *temporal.TimeoutError
	if !errors.As(err, &timeout) || timeout.TimeoutType() != enumspb.TIMEOUT_TYPE_HEARTBEAT || !timeout.HasLastHeartbeatDetails() {
		return ctx
	}
	// The failure converter hands back the payloads it was given, without
	// opening them (LastHeartbeatDetails would decode them).
	details := temporal.GetDefaultFailureConverter().ErrorToFailure(timeout).GetTimeoutFailureInfo().GetLastHeartbeatDetails()
	if len(details.GetPayloads()) == 0 {
		return ctx
	}
	return workflow.WithValue(ctx, carriedKey{}, details)
}

// Load fills v with where an earlier attempt of this activity got to and
// reports whether it did: the attempt's own heartbeat details when
// Temporal retried it, else the details a lost attempt carried over
// (After). Details that do not open or decode count as none, and the
// activity starts over. Outside an activity it reports false.
func Load(ctx context.Context, v any) bool {
	if !activity.IsActivity(ctx) {
		return false
	}
	if activity.HasHeartbeatDetails(ctx) {
		return activity.GetHeartbeatDetails(ctx, v) == nil
	}
	c, ok := ctx.Value(carriedKey{}).(carried)
	if !ok {
		return false
	}
	if err := c.decode(activity.GetInfo(ctx), v); err != nil {
		activity.GetLogger(ctx).Warn("the details a lost attempt carried over do not decode: starting over", "error", err)
		return false
	}
	return true
}

// carried is what an activity received in its header.
type carried struct {
	payload *commonpb.Payload
	dc      converter.DataConverter
}

func (c carried) decode(info activity.Info, v any) error {
	var details commonpb.Payloads
	if err := converter.GetDefaultDataConverter().FromPayload(c.payload, &details); err != nil {
		return err
	}
	dc := c.dc
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	dc = converter.WithDataConverterSerializationContext(dc, converter.ActivitySerializationContext{
		Namespace: info.Namespace, WorkflowID: info.WorkflowExecution.ID, WorkflowType: info.WorkflowType.Name,
		ActivityType: info.ActivityType.Name, TaskQueue: info.TaskQueue,
	})
	return dc.FromPayloads(&details, v)
}

// Interceptor sends carried details with an activity task and receives
// them on the worker that runs it. Register it on every worker.
type Interceptor struct {
	interceptor.WorkerInterceptorBase
	// DataConverter opens the carried details: the worker client's, with
	// the payload codec (nil: Temporal's default, which opens no sealed
	// payload, so every attempt after a lost one starts over).
	DataConverter converter.DataConverter
}

// InterceptActivity makes the received details readable to Load.
func (i *Interceptor) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &activityInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, dc: i.DataConverter}
}

// InterceptWorkflow writes the details After put on a context into the
// header of the activity scheduled with it.
func (i *Interceptor) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &workflowInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type activityInbound struct {
	interceptor.ActivityInboundInterceptorBase
	dc converter.DataConverter
}

func (a *activityInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if p, ok := interceptor.Header(ctx)[Header]; ok && p != nil {
		ctx = context.WithValue(ctx, carriedKey{}, carried{payload: p, dc: a.dc})
	}
	return a.Next.ExecuteActivity(ctx, in)
}

type workflowInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (w *workflowInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return w.Next.Init(&workflowOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}})
}

type workflowOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
}

func (w *workflowOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	if details, ok := ctx.Value(carriedKey{}).(*commonpb.Payloads); ok {
		// The payloads are kept as they are (sealed); only the list
		// around them is encoded, as protobuf JSON.
		if p, err := converter.GetDefaultDataConverter().ToPayload(details); err == nil {
			if h := interceptor.WorkflowHeader(ctx); h != nil {
				h[Header] = p
			}
		}
	}
	return w.Next.ExecuteActivity(ctx, activityType, args...)
}

// Began is when the work a lost attempt heartbeated began: started, when
// it is set and not after now (a worker whose clock is ahead of this
// one's), and true; else now and false.
func Began(started, now time.Time) (time.Time, bool) {
	if started.IsZero() || started.After(now) {
		return now, false
	}
	return started, true
}

// StartedAt is when the work a lost attempt heartbeated began, for
// details that say so in a "startedAt" field (a wait's or a drain's
// deadline counts from it), or now.
func StartedAt(ctx context.Context) time.Time {
	var p struct {
		StartedAt time.Time `json:"startedAt"`
	}
	if !Load(ctx, &p) {
		return time.Now()
	}
	at, _ := Began(p.StartedAt, time.Now())
	return at
}
