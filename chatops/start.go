package chatops

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/internal/responseurl"
	"kedge.dev/kedge/internal/searchattr"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/workflows"
)

// Memo fields of a run started from chat.
const (
	memoRequest = "kedgeRequest" // the request key: who asked, and which request
	memoBy      = "kedgeBy"      // the subject that started it
)

// startRequest is a runbook someone asked to start.
type startRequest struct {
	Subject Subject
	Runbook string
	Cluster string
	Params  map[string]any
	// RequestID identifies the request (a Slack trigger_id, an
	// X-Kedge-Request-Id); "" derives the key from the params, so only a
	// run still open counts as the same request.
	RequestID   string
	ResponseURL string // where chat.follow posts progress ("" = nowhere)
	ChannelID   string
	// Signed is how the request was authenticated: its run's workflow ID
	// is derived from it.
	Signed signed
}

// signed is what authenticated a request.
type signed struct {
	// Secret is the key that verified it (a webhook key, Slack's signing
	// secret): workflow IDs are keyed with it, so nobody without it can
	// compute one and take it first.
	Secret []byte
	// MAC is what the signature covers, as the server computed it (the
	// hook's HMAC; for Slack, the timestamp and body), and At the signed
	// timestamp.
	MAC []byte
	At  time.Time
}

// started is the answer to a start.
type started struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	URL        string `json:"url"`
	// Existing is true when this same request had already started the
	// run: nothing new was started.
	Existing bool `json:"existing"`
}

// runID is the workflow ID of the run a request starts, derived from the
// request alone, so that the same request always names the same run and
// Temporal (which never starts a workflow ID twice: see start) remembers
// it across restarts and replicas:
//
//   - with a request ID: RUNBOOK/CLUSTER/id-HASH of the sender and the
//     request ID, whatever its timestamp or what ran in between;
//   - without: RUNBOOK/CLUSTER/SIGNEDTIME-HASH of the signature, so the
//     same signed bytes sent again name the same run.
//
// HASH is an HMAC with the secret that verified the request: nobody
// without it can compute the ID of a request and start a workflow under
// it first. Like `kedge run`'s IDs, it starts with RUNBOOK/CLUSTER/, where
// status, approvals and the busy check find the cluster.
func (r *startRequest) runID() string {
	m := hmac.New(sha256.New, r.Signed.Secret)
	if r.RequestID != "" {
		fmt.Fprintf(m, "kedge request id\x00%s\x00%s\x00%s\x00%s\x00%s", r.Subject.Source, r.Subject.Key, r.Runbook, r.Cluster, r.RequestID)
		return workflows.RunWorkflowID(r.Runbook, r.Cluster, "id-"+hex.EncodeToString(m.Sum(nil))[:16])
	}
	fmt.Fprintf(m, "kedge signature\x00%s\x00%s\x00%s\x00%s\x00", r.Subject.Source, r.Subject.Key, r.Runbook, r.Cluster)
	m.Write(r.Signed.MAC)
	return workflows.RunWorkflowID(r.Runbook, r.Cluster, r.Signed.At.UTC().Format("20060102-150405")+"-"+hex.EncodeToString(m.Sum(nil))[:12])
}

// FollowID is the workflow ID of the chat-follow workflow of one run.
func FollowID(runbookID, runID string) string { return "chat/" + runbookID + "/" + runID }

// prepare authorizes a start and makes it ready as every front door does
// (runs.Prepare: chat names runbooks only, never an internal one), then
// maps a refusal to its HTTP status. It never contacts Temporal.
func (s *Server) prepare(req *startRequest) (workflows.RunbookInput, error) {
	var in workflows.RunbookInput
	if _, err := s.Config.Authorize(req.Subject, VerbStart, req.Runbook, req.Cluster); err != nil {
		return in, err
	}
	invPath, ok := s.Config.Clusters[req.Cluster]
	if !ok {
		return in, refuse(http.StatusUnprocessableEntity, "unknown cluster %q (known: %s)", req.Cluster, strings.Join(s.clusterNames(), ", "))
	}
	lib := &runbooks.Library{Dirs: s.Config.RunbookPath, Builtin: runbooks.Builtin}
	p, err := runs.Prepare(invPath, req.Runbook, req.Params, runs.Policy{Library: lib, Cluster: req.Cluster})
	var refused *runs.PrepareError
	if !errors.As(err, &refused) {
		if err != nil {
			return in, err
		}
		return p.Input(), nil
	}
	switch refused.Refusal {
	case runs.BadInventory:
		s.log().Error("kedge webhook: invalid inventory", "cluster", req.Cluster, "file", invPath, "error", refused.Err.Error())
		return in, refuse(http.StatusInternalServerError, "the inventory of %s is invalid; see the webhook server's log", req.Cluster)
	case runs.WrongCluster:
		// Runs know their cluster by the inventory's name: approvals and
		// status are authorized by it, so the two must agree.
		s.log().Error("kedge webhook: a cluster's inventory names another cluster", "cluster", req.Cluster, "file", invPath, "inventoryName", refused.Cluster)
		return in, refuse(http.StatusInternalServerError, "%v", refused.Err)
	case runs.NoRunbook:
		return in, refuse(http.StatusUnprocessableEntity, "no runbook named %q", req.Runbook)
	case runs.BadRunbook:
		s.log().Error("kedge webhook: invalid runbook", "runbook", req.Runbook, "error", refused.Err.Error())
		return in, refuse(http.StatusUnprocessableEntity, "runbook %s is invalid:\n%v", req.Runbook, refused.Err)
	case runs.InternalRunbook:
		return in, refuse(http.StatusForbidden, "%v", refused.Err)
	case runs.BadParams:
		return in, refuse(http.StatusUnprocessableEntity, "bad params for %s:\n%s", req.Runbook, chatParamErrors(refused.Err))
	}
	return in, refuse(http.StatusUnprocessableEntity, "%v", refused)
}

func (s *Server) clusterNames() []string {
	var names []string
	for n := range s.Config.Clusters {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// requestKey identifies a request across retries.
func requestKey(req *startRequest, in workflows.RunbookInput) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", req.Subject.Source, req.Subject.Key, req.Runbook, req.Cluster)
	if req.RequestID != "" {
		fmt.Fprintf(h, "id\x00%s", req.RequestID)
	} else {
		params, _ := json.Marshal(in.Params) // map keys are sorted: stable
		fmt.Fprintf(h, "params\x00%s", params)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// busyError is a refusal because the runbook already runs on the cluster.
func (s *Server) busyError(runbook, cluster, id, runID, by string) error {
	who := ""
	if by != "" {
		who = " (started by " + by + ")"
	}
	return &httpError{Status: http.StatusConflict, Msg: fmt.Sprintf("%s is already running on %s%s: %s — wait for it to end, or cancel it first",
		runbook, cluster, who, s.link(id, runID))}
}

// start starts a prepared runbook exactly once per request, and its
// chat-follow workflow when the request has somewhere to post.
//
// Once: the run's workflow ID is derived from the request (runID) and
// started with a reuse policy that refuses an ID Temporal has seen, open
// or closed, for as long as it keeps the closed run (the namespace's
// retention, beyond a signature's five minutes). So the same request,
// replayed or retried, after a restart of this server, on another
// replica, or after other runs, finds its run and starts nothing.
//
// One run of a runbook per cluster at a time: see busy.
func (s *Server) start(ctx context.Context, req *startRequest, in workflows.RunbookInput) (*started, error) {
	id := req.runID()
	key := requestKey(req, in)
	unlock, err := s.holdRunbook(ctx, req.Runbook, req.Cluster)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// This request started its run already: answer with it.
	if prev, err := s.describe(ctx, id, ""); err == nil {
		return s.sameRequest(ctx, req, id, prev, key)
	} else if !isNotFound(err) {
		return nil, err
	}
	if st, err := s.busy(ctx, req, key); st != nil || err != nil {
		return st, err
	}
	// Started as `kedge run` starts runbooks, so the Web UI lists and
	// filters it the same way.
	run, err := runs.Start(ctx, s.Client, runs.StartOptions{
		ID: id, TaskQueue: s.taskQueue(), By: req.Subject.String(),
		Memo: map[string]any{memoRequest: key, memoBy: req.Subject.String()},
	}, in, s.now())
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		// The same request, on another replica, won the race between
		// the look-up and the start.
		prev, derr := s.describe(ctx, id, "")
		if derr != nil {
			return nil, derr
		}
		return s.sameRequest(ctx, req, id, prev, key)
	}
	if searchattr.IsMissing(err) {
		return nil, fmt.Errorf("start %s: the namespace lacks Kedge's search attributes: run `kedge setup` once for it: %w", id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", id, err)
	}
	s.startedRun(req.Runbook, req.Cluster, id)
	st := &started{WorkflowID: id, RunID: run.GetRunID(), URL: s.link(id, run.GetRunID())}
	return st, s.follow(ctx, req, in, st)
}

// sameRequest answers a request whose workflow ID holds a run: the one
// it started, when the run's memo names this request. Anything else under
// that ID was not started by this server for it (the memo is sealed, so a
// client without the codec key cannot fake one): refused, never taken
// for the request's run.
func (s *Server) sameRequest(ctx context.Context, req *startRequest, id string, prev runInfo, key string) (*started, error) {
	if prev.request != key {
		s.log().Warn("kedge webhook: a request's workflow ID holds a run it did not start", "audit", true,
			"workflowId", id, "runId", prev.runID, "subject", req.Subject.String())
		return nil, refuse(http.StatusConflict, "the workflow ID of this request, %s, holds a run it did not start: nothing started", id)
	}
	return s.existing(ctx, req, id, prev.runID)
}

// busy refuses a start while another run of the runbook holds the
// cluster (runs.Holders, runs `kedge run` started included), or answers
// with that run when it was started by an equal request (the same
// params, without a request ID). Visibility can lag a start by a moment:
// within one server holdRunbook and the run it started last (asked for
// by ID) cover that; two replicas starting the same runbook on the same
// cluster within that moment both start, and the later run's admission
// refuses it.
func (s *Server) busy(ctx context.Context, req *startRequest, key string) (*started, error) {
	holders, err := runs.Holders(ctx, s.Client, s.namespace(), req.Runbook, req.Cluster, nil, s.lastStarted(req.Runbook, req.Cluster))
	if err != nil {
		return nil, err
	}
	open := make([]runInfo, 0, len(holders))
	for _, e := range holders {
		open = append(open, s.runInfoOf(e))
	}
	for _, ri := range open {
		if ri.request == key {
			st, err := s.existing(ctx, req, ri.id, ri.runID)
			return st, err
		}
	}
	if len(open) > 0 {
		return nil, s.busyError(req.Runbook, req.Cluster, open[0].id, open[0].runID, open[0].by)
	}
	return nil, nil
}

// holdRunbook serializes this server's starts of one runbook on one
// cluster, so that two requests arriving together see each other's run.
func (s *Server) holdRunbook(ctx context.Context, runbook, cluster string) (func(), error) {
	s.runsMu.Lock()
	if s.runs == nil {
		s.runs = map[string]*runbookRuns{}
	}
	r, ok := s.runs[runbook+"/"+cluster]
	if !ok {
		r = &runbookRuns{hold: make(chan struct{}, 1)}
		s.runs[runbook+"/"+cluster] = r
	}
	s.runsMu.Unlock()
	select {
	case r.hold <- struct{}{}:
		return func() { <-r.hold }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *Server) startedRun(runbook, cluster, id string) {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	if r := s.runs[runbook+"/"+cluster]; r != nil {
		r.last = id
	}
}

func (s *Server) lastStarted(runbook, cluster string) string {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	if r := s.runs[runbook+"/"+cluster]; r != nil {
		return r.last
	}
	return ""
}

// existing answers a repeated request with the run it started, making sure
// its chat-follow workflow runs.
func (s *Server) existing(ctx context.Context, req *startRequest, id, runID string) (*started, error) {
	st := &started{WorkflowID: id, RunID: runID, URL: s.link(id, runID), Existing: true}
	return st, s.follow(ctx, req, workflows.RunbookInput{}, st)
}

// follow starts the chat-follow workflow that posts a run's progress and
// result to the request's response_url. One per run: a repeated request
// finds it started.
func (s *Server) follow(ctx context.Context, req *startRequest, in workflows.RunbookInput, st *started) error {
	if req.ResponseURL == "" {
		return nil
	}
	if !s.Config.responseURLAllowed(req.ResponseURL) {
		s.log().Warn("kedge webhook: response_url not allowed by responseURLs; progress will not be posted",
			"workflowId", st.WorkflowID, "host", responseurl.Host(req.ResponseURL))
		return nil
	}
	fin := workflows.ChatFollowInput{
		WorkflowID: st.WorkflowID, RunID: st.RunID, Runbook: req.Runbook, Cluster: req.Cluster,
		By: req.Subject.String(), ResponseURL: req.ResponseURL, Channel: req.ChannelID,
		Link: st.URL, StartedAt: s.now().UTC(),
	}
	_, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       FollowID(st.WorkflowID, st.RunID),
		TaskQueue:                s.taskQueue(),
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:            fmt.Sprintf("post the progress of %s to chat", st.WorkflowID),
	}, workflows.ChatFollowWorkflow, fin)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &already) {
		return fmt.Errorf("start the chat follower of %s: %w", st.WorkflowID, err)
	}
	return nil
}

// runInfo is what a run's description tells.
type runInfo struct {
	id       string
	runID    string
	status   enumspb.WorkflowExecutionStatus
	request  string
	by       string
	parent   string
	typeName string
}

func (s *Server) describe(ctx context.Context, id, runID string) (runInfo, error) {
	d, err := s.Client.DescribeWorkflowExecution(ctx, id, runID)
	if err != nil {
		return runInfo{}, err
	}
	return s.runInfoOf(d.GetWorkflowExecutionInfo()), nil
}

// runInfoOf reads a run's description or list entry; its memo is opened
// with the codec (a memo that does not open reads as none).
func (s *Server) runInfoOf(info *workflowpb.WorkflowExecutionInfo) runInfo {
	ri := runInfo{id: info.GetExecution().GetWorkflowId(), runID: info.GetExecution().GetRunId(), status: info.GetStatus(), typeName: info.GetType().GetName()}
	if p := info.GetParentExecution(); p != nil {
		ri.parent = p.GetWorkflowId()
	}
	dc := s.dataConverter()
	for k, dst := range map[string]*string{memoRequest: &ri.request, memoBy: &ri.by} {
		if p, ok := info.GetMemo().GetFields()[k]; ok {
			if dc.FromPayload(p, dst) != nil {
				*dst = ""
			}
		}
	}
	return ri
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// chatParamErrors says what is wrong with a request's params the way chat
// gives them: name=VALUE, not the CLI's --set.
func chatParamErrors(err error) string {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	lines := make([]string, 0, len(errs))
	for _, e := range errs {
		var missing *runbooks.MissingParamError
		if errors.As(e, &missing) {
			lines = append(lines, fmt.Sprintf("runbook %s needs param %q (%s); give it as %s=VALUE", missing.Runbook, missing.Param, missing.Type, missing.Param))
			continue
		}
		lines = append(lines, e.Error())
	}
	return strings.Join(lines, "\n")
}
