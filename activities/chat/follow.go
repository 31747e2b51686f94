package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/slack-go/slack"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/internal/responseurl"
	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/slackmsg"
	"kedge.dev/kedge/workflows"
)

// EnvBotToken names the variable a worker reads a Slack bot token from. With
// one, messages go to the channel (chat.postMessage) once a response_url
// is used up (5 posts) or expired (30 minutes).
const EnvBotToken = "KEDGE_SLACK_BOT_TOKEN"

// Slack's limits on a response_url.
const (
	responseURLPosts = 5
	responseURLLife  = 30 * time.Minute
)

// followState is what an attempt of chat.follow heartbeats, so the next
// attempt neither posts twice nor misses a post.
type followState struct {
	Posts        int       `json:"posts"`
	PauseKey     string    `json:"pauseKey"`
	Finished     int       `json:"finished"` // top-level steps finished at the last progress post
	LastProgress time.Time `json:"lastProgress"`
	Final        bool      `json:"final"`
	// WaveKey is where a rollout-shaped run's waves were at the last wave
	// post (slackmsg.WaveKey); WaveSince is when they were first seen
	// elsewhere since (zero: not).
	WaveKey   string    `json:"waveKey,omitempty"`
	WaveSince time.Time `json:"waveSince,omitzero"`
}

// Notifier is the chat.follow activity: it watches a run through Temporal
// and posts to Slack.
type Notifier struct {
	Client client.Client
	// DataConverter opens the last failures of the run's pending
	// activities (the worker client's, with the codec).
	DataConverter converter.DataConverter
	HTTP          *http.Client
	Logger        *slog.Logger
	// Poll is how often the run is looked at (default 1 s).
	Poll time.Duration
	// ProgressEvery spaces progress posts (default 1 min); pauses and the
	// result are posted at once.
	ProgressEvery time.Duration
	// WaveSettle is how long a rollout-shaped run's waves must have
	// changed before the change is posted (default 5 s), so that changes
	// close together make one post.
	WaveSettle time.Duration
	// BotToken, when set, posts with chat.postMessage to the command's
	// channel once the response_url is used up or expired.
	BotToken    string
	SlackAPIURL string // for tests; "" is Slack's
	// ResponseURLAllowed says where the worker may post: the run's
	// response_url is checked again here, since whoever can start a
	// workflow chooses it (nil: responseurl.DefaultPrefixes, Slack's).
	ResponseURLAllowed func(string) bool
}

// NewNotifier builds the notifier a worker registers; the bot token comes
// from $KEDGE_SLACK_BOT_TOKEN.
func NewNotifier(c client.Client, log *slog.Logger) *Notifier {
	return &Notifier{Client: c, Logger: log, BotToken: os.Getenv(EnvBotToken)}
}

// opener opens what the followed run's pending activities say, in the
// namespace this activity runs in (the run's).
func (n *Notifier) opener(ctx context.Context) runs.Opener {
	return runs.Opener{Namespace: activity.GetInfo(ctx).Namespace, DataConverter: n.DataConverter}
}

func (n *Notifier) log() *slog.Logger {
	if n.Logger == nil {
		return slog.Default()
	}
	return n.Logger
}

// Follow watches a run until it ends: it posts Continue/Abort buttons when
// the run pauses for a decision, progress as top-level steps finish, and
// the result at the end.
func (n *Notifier) Follow(ctx context.Context, in workflows.ChatFollowInput) (workflows.ChatFollowResult, error) {
	if in.WorkflowID == "" || in.ResponseURL == "" {
		return workflows.ChatFollowResult{}, temporal.NewNonRetryableApplicationError("chat.follow needs a workflow ID and a response URL", errtype.InvalidInput, nil)
	}
	allowed := n.ResponseURLAllowed
	if allowed == nil {
		allowed = func(u string) bool { return responseurl.Allowed(responseurl.DefaultPrefixes, u) }
	}
	if !allowed(in.ResponseURL) {
		info := activity.GetInfo(ctx)
		n.log().Warn("kedge worker: action refused", "audit", true, "workflowId", info.WorkflowExecution.ID,
			"activity", info.ActivityType.Name, "reason", "response_url not allowed", "host", responseurl.Host(in.ResponseURL))
		return workflows.ChatFollowResult{}, temporal.NewNonRetryableApplicationError(
			"chat.follow: the response_url's host "+responseurl.Host(in.ResponseURL)+" is not one this worker posts to (kedge worker --chat-response-url)", errtype.CredentialRefused, nil)
	}
	var st followState
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &st)
	}
	poll := n.Poll
	if poll <= 0 {
		poll = time.Second
	}
	every := n.ProgressEvery
	if every <= 0 {
		every = time.Minute
	}
	for !st.Final {
		activity.RecordHeartbeat(ctx, st)
		d, err := n.Client.DescribeWorkflowExecution(ctx, in.WorkflowID, in.RunID)
		if err != nil {
			return workflows.ChatFollowResult{Posts: st.Posts}, fmt.Errorf("describe %s: %w", in.WorkflowID, err)
		}
		status := d.GetWorkflowExecutionInfo().GetStatus()
		if status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			state := n.postResult(ctx, in, &st, d.GetWorkflowExecutionInfo().GetCloseTime().AsTime())
			activity.RecordHeartbeat(ctx, st)
			return workflows.ChatFollowResult{Posts: st.Posts, State: state}, nil
		}
		if p, err := runs.Progress(ctx, n.Client, n.opener(ctx), in.WorkflowID, in.RunID); err == nil {
			n.postChanges(ctx, in, &st, p, every)
		}
		select {
		case <-ctx.Done():
			return workflows.ChatFollowResult{Posts: st.Posts}, ctx.Err()
		case <-time.After(poll):
		}
	}
	return workflows.ChatFollowResult{Posts: st.Posts}, nil
}

// pausesKey identifies a set of pauses (the follower posts when it changes).
func pausesKey(ps []runs.Pause) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%s|%s|%s|%d", p.Kind, p.Target, p.Step, p.Seq))
	}
	return strings.Join(parts, ";")
}

// postChanges posts new pauses, and progress when top-level steps finished.
func (n *Notifier) postChanges(ctx context.Context, in workflows.ChatFollowInput, st *followState, p workflows.Progress, every time.Duration) {
	pauses := runs.FindPauses(ctx, n.Client, p, in.WorkflowID)
	if key := pausesKey(pauses); key != st.PauseKey {
		st.PauseKey = key
		for _, pa := range pauses {
			// Keep one post for the result.
			if n.post(ctx, in, st, slackmsg.PauseMessage(in, pa), 1) {
				n.log().Info("chat.follow: posted a decision request", "workflowId", in.WorkflowID, "step", pa.Step, "kind", pa.Kind)
			}
		}
	}
	if slackmsg.RolloutShaped(p) {
		n.postWaves(ctx, in, st, p, every)
		return
	}
	finished := workflows.NewView(p, workflows.ViewOptions{}).Steps.Ended()
	if finished > st.Finished && finished < len(p.Steps) && time.Since(st.LastProgress) >= every {
		// Keep two posts: a pause and the result.
		runs.ExpandRollouts(ctx, n.Client, &p, nil)
		if n.post(ctx, in, st, slackmsg.ProgressMessage(in, p), 2) {
			st.Finished, st.LastProgress = finished, time.Now()
		}
	}
}

// postWaves posts a rollout-shaped run's waves when they changed (a wave
// started or ended, a node ended, a window wait began or ended, an
// approval waits): once the change has settled for WaveSettle, and at
// most once every every; changes meanwhile make one post, of where the
// run is then.
func (n *Notifier) postWaves(ctx context.Context, in workflows.ChatFollowInput, st *followState, p workflows.Progress, every time.Duration) {
	runs.ExpandRollouts(ctx, n.Client, &p, nil)
	key := slackmsg.WaveKey(p)
	settle := n.WaveSettle
	if settle <= 0 {
		settle = 5 * time.Second
	}
	now := time.Now()
	if !waveDue(st, key, now, settle, every) {
		return
	}
	items := n.itemProgress(ctx, p)
	// Keep two posts: a pause and the result.
	if n.post(ctx, in, st, slackmsg.WaveMessage(in, p, items), 2) {
		st.WaveKey, st.WaveSince, st.LastProgress = key, time.Time{}, now
		n.log().Info("chat.follow: posted the waves", "workflowId", in.WorkflowID)
	}
}

// waveDue says whether the waves, now at key, are to be posted: changed
// from the last post for settle at least, and the last progress post
// every ago at least. It keeps in st since when they differ.
func waveDue(st *followState, key string, now time.Time, settle, every time.Duration) bool {
	if key == st.WaveKey {
		st.WaveSince = time.Time{}
		return false
	}
	if st.WaveSince.IsZero() {
		st.WaveSince = now
	}
	return now.Sub(st.WaveSince) >= settle && now.Sub(st.LastProgress) >= every
}

// itemProgress reads the runbooks of the rollout items a wave message
// tells of: the running ones, and the one item of a one-item wave.
func (n *Notifier) itemProgress(ctx context.Context, p workflows.Progress) map[string]workflows.Progress {
	out := map[string]workflows.Progress{}
	for _, s := range p.Steps {
		for _, it := range s.Items {
			running := it.State == workflows.StateRunning || it.State == workflows.StateWaiting
			if it.Child == "" || !(running || len(s.Items) == 1 && it.State == workflows.StateSucceeded) {
				continue
			}
			if cp, err := runs.Progress(ctx, n.Client, runs.Opener{}, it.Child, ""); err == nil {
				out[it.Child] = cp
			}
		}
	}
	return out
}

// postResult posts how the run ended and returns its state.
func (n *Notifier) postResult(ctx context.Context, in workflows.ChatFollowInput, st *followState, closed time.Time) string {
	var res workflows.RunbookResult
	runErr := n.Client.GetWorkflow(ctx, in.WorkflowID, in.RunID).Get(ctx, &res)
	p := res.Progress
	if runErr != nil || len(p.Steps) == 0 {
		if q, err := runs.Progress(ctx, n.Client, n.opener(ctx), in.WorkflowID, in.RunID); err == nil {
			p = q
		}
	}
	if p.State == "" || p.State == workflows.StateRunning {
		p.State = workflows.StateFailed
		if runErr == nil {
			p.State = workflows.StateSucceeded
		}
	}
	var canceled *temporal.CanceledError
	if errors.As(runErr, &canceled) {
		p.State = workflows.StateCancelled
	}
	msg := ""
	if runErr != nil && p.State != workflows.StateCancelled {
		msg = runs.RootMessage(runErr)
	}
	var took time.Duration
	if !p.StartedAt.IsZero() && closed.After(p.StartedAt) {
		took = closed.Sub(p.StartedAt)
	}
	runs.ExpandRollouts(ctx, n.Client, &p, nil)
	n.post(ctx, in, st, slackmsg.ResultMessage(in, p, msg, took), 0)
	st.Final = true
	return p.State
}

// post sends m to the response_url while it has more than reserve posts
// left and has not expired, else to the channel with the bot token. It
// reports whether the message went out.
func (n *Notifier) post(ctx context.Context, in workflows.ChatFollowInput, st *followState, m *slack.WebhookMessage, reserve int) bool {
	hc := responseurl.NoRedirects(n.HTTP, 15*time.Second)
	fresh := time.Since(in.StartedAt) < responseURLLife-time.Minute
	var err error
	switch {
	case fresh && st.Posts < responseURLPosts-reserve:
		if err = postWebhook(ctx, hc, in.ResponseURL, m); err == nil {
			st.Posts++
			return true
		}
	case fresh && reserve > 0 && n.BotToken == "":
		n.log().Info("chat.follow: response_url budget kept for later posts", "workflowId", in.WorkflowID, "posts", st.Posts)
		return false
	}
	if n.BotToken != "" && in.Channel != "" {
		opts := []slack.Option{slack.OptionHTTPClient(hc)}
		if n.SlackAPIURL != "" {
			opts = append(opts, slack.OptionAPIURL(n.SlackAPIURL))
		}
		var blocks []slack.Block
		if m.Blocks != nil {
			blocks = m.Blocks.BlockSet
		}
		_, _, err = slack.New(n.BotToken, opts...).PostMessageContext(ctx, in.Channel,
			slack.MsgOptionText(m.Text, false), slack.MsgOptionBlocks(blocks...))
		if err == nil {
			return true
		}
	}
	if err == nil {
		err = errors.New("the response_url expired or is used up, and no bot token is set")
	}
	n.log().Warn("chat.follow: posting to chat failed", "workflowId", in.WorkflowID, "host", responseurl.Host(in.ResponseURL), "error", err.Error())
	return false
}

// postWebhook posts to a response_url, trying again on network errors and
// 5xx answers (three tries in all).
func postWebhook(ctx context.Context, hc *http.Client, url string, m *slack.WebhookMessage) error {
	var err error
	for try := range 3 {
		if try > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(try) * time.Second):
			}
		}
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err = slack.PostWebhookCustomHTTPContext(pctx, url, hc, m)
		cancel()
		var sc slack.StatusCodeError
		if err == nil || (errors.As(err, &sc) && sc.Code < 500) {
			return err
		}
	}
	return err
}
