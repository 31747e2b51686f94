package worker

import (
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/internal/metrics"
	"kedge.dev/kedge/workflows"
)

// kedgeMetrics adds Kedge's counters (metrics.StepsRun, StepsFailed,
// NodesRolled) to the SDK's metrics handler from inside the workflows,
// without touching them: the workflow handler drops what is emitted
// while replaying, so a counter moves once per real event. Runbooks and
// rollouts are told apart by their input and result types, not by
// workflow type names. Everything here runs as workflow code and must
// stay deterministic.
type kedgeMetrics struct {
	interceptor.WorkerInterceptorBase
}

func (*kedgeMetrics) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &workflowMetrics{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type workflowMetrics struct {
	interceptor.WorkflowInboundInterceptorBase
	rollout bool // this workflow is a rollout: its runbook children are nodes
}

func (w *workflowMetrics) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return w.Next.Init(&rolloutMetrics{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, wf: w})
}

// ExecuteWorkflow counts a finished runbook's steps, failed or not.
func (w *workflowMetrics) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	if len(in.Args) > 0 {
		_, w.rollout = in.Args[0].(workflows.RolloutInput)
	}
	res, err := w.Next.ExecuteWorkflow(ctx, in)
	if r, ok := res.(workflows.RunbookResult); ok {
		ran, failed := 0, 0
		for _, s := range r.Progress.Steps {
			switch s.State {
			case workflows.StateSucceeded, workflows.StateCancelled:
				ran++
			case workflows.StateFailed:
				ran++
				failed++
			}
		}
		h := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"runbook": r.Progress.Runbook, "cluster": r.Progress.Cluster})
		h.Counter(metrics.StepsRun).Inc(int64(ran))
		h.Counter(metrics.StepsFailed).Inc(int64(failed))
	}
	return res, err
}

// rolloutMetrics counts the node runbooks of a rollout that succeed.
type rolloutMetrics struct {
	interceptor.WorkflowOutboundInterceptorBase
	wf *workflowMetrics
}

func (o *rolloutMetrics) ExecuteChildWorkflow(ctx workflow.Context, childType string, args ...any) workflow.ChildWorkflowFuture {
	f := o.Next.ExecuteChildWorkflow(ctx, childType, args...)
	if !o.wf.rollout || len(args) == 0 {
		return f
	}
	in, ok := args[0].(workflows.RunbookInput)
	if !ok {
		return f // a compensation, not a node
	}
	tags := map[string]string{"runbook": in.Runbook.Name, "cluster": in.Cluster.Name}
	o.Next.Go(ctx, "kedge-metrics", func(ctx workflow.Context) {
		if f.Get(ctx, nil) == nil {
			workflow.GetMetricsHandler(ctx).WithTags(tags).Counter(metrics.NodesRolled).Inc(1)
		}
	})
	return f
}
