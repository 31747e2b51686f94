package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"kedge.dev/kedge/actions/errtype"
)

// The workflow and activity that post a run's progress to chat.
const (
	ChatFollowWorkflow = "chat-follow"
	ChatFollowActivity = "chat.follow"
)

// ChatFollowInput says which run to follow and where to post.
type ChatFollowInput struct {
	WorkflowID  string    `json:"workflowId"`
	RunID       string    `json:"runId"`
	Runbook     string    `json:"runbook"`
	Cluster     string    `json:"cluster"`
	By          string    `json:"by"`
	ResponseURL string    `json:"responseUrl"`
	Channel     string    `json:"channel,omitempty"`
	Link        string    `json:"link"`
	StartedAt   time.Time `json:"startedAt"` // when the response_url was issued
}

// chatFollowAdmissionChange versions chat-follow's admission check: a
// follower started again from a copied input would post to chat again.
const chatFollowAdmissionChange = "kedge-chat-follow-admission"

// ChatFollowResult is what the follower posted.
type ChatFollowResult struct {
	Posts int    `json:"posts"`
	State string `json:"state"` // how the run ended
}

// ChatFollow is the chat-follow workflow: admitted like a runbook's run
// (started near StartedAt, the only run of its ID), it runs chat.follow
// until the run it follows has ended and its result is posted.
func ChatFollow(ctx workflow.Context, in ChatFollowInput) (ChatFollowResult, error) {
	if err := admitTool(ctx, chatFollowAdmissionChange, in.StartedAt); err != nil {
		return ChatFollowResult{}, err
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 7 * 24 * time.Hour,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{errtype.InvalidInput},
		},
	})
	var res ChatFollowResult
	err := workflow.ExecuteActivity(ctx, ChatFollowActivity, in).Get(ctx, &res)
	return res, err
}
