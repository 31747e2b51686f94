package chatops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"kedge.dev/kedge/internal/searchattr"
	"kedge.dev/kedge/runbooks"
	"kedge.dev/kedge/runbooks/inventory"
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

// RunbookID is the workflow ID of a runbook started from chat on a
// cluster. It names only the runbook and the cluster, so Temporal refuses a
// second one while the first runs.
func RunbookID(runbook, cluster string) string { return runbook + "/" + cluster }

// FollowID is the workflow ID of the chat-follow workflow of one run.
func FollowID(runbookID, runID string) string { return "chat/" + runbookID + "/" + runID }

// prepare authorizes and validates a start: the runbook loads against the
// cluster's inventory and the params resolve. It never contacts Temporal.
func (s *Server) prepare(req *startRequest) (workflows.RunbookInput, error) {
	var in workflows.RunbookInput
	if _, err := s.Config.Authorize(req.Subject, VerbStart, req.Runbook, req.Cluster); err != nil {
		return in, err
	}
	invPath, ok := s.Config.Clusters[req.Cluster]
	if !ok {
		return in, refuse(http.StatusUnprocessableEntity, "unknown cluster %q (known: %s)", req.Cluster, strings.Join(s.clusterNames(), ", "))
	}
	cluster, err := inventory.LoadFile(invPath)
	if err != nil {
		s.log().Error("kedge webhook: invalid inventory", "cluster", req.Cluster, "file", invPath, "error", err.Error())
		return in, refuse(http.StatusInternalServerError, "the inventory of %s is invalid; see the webhook server's log", req.Cluster)
	}
	if cluster.Name != req.Cluster {
		// Runs know their cluster by the inventory's name: approvals and
		// status are authorized by it, so the two must agree.
		s.log().Error("kedge webhook: a cluster's inventory names another cluster", "cluster", req.Cluster, "file", invPath, "inventoryName", cluster.Name)
		return in, refuse(http.StatusInternalServerError, "the inventory of %s names the cluster %q; the config must call it that", req.Cluster, cluster.Name)
	}
	lib := &runbooks.Library{Dirs: s.Config.RunbookPath, Builtin: runbooks.Builtin}
	loaded, err := lib.Load(req.Runbook, cluster)
	if err != nil {
		if strings.HasPrefix(err.Error(), "no runbook named") {
			return in, refuse(http.StatusUnprocessableEntity, "no runbook named %q", req.Runbook)
		}
		s.log().Error("kedge webhook: invalid runbook", "runbook", req.Runbook, "error", err.Error())
		return in, refuse(http.StatusUnprocessableEntity, "runbook %s is invalid:\n%v", req.Runbook, err)
	}
	if loaded.Runbook.Internal {
		return in, refuse(http.StatusForbidden, "%s is called by other runbooks only: it cannot be started from chat or a webhook", req.Runbook)
	}
	params, err := runbooks.ResolveParams(loaded.Runbook, req.Params, cluster)
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), "; set it with --set ", "; give it as ")
		return in, refuse(http.StatusUnprocessableEntity, "bad params for %s:\n%s", req.Runbook, msg)
	}
	in = workflows.RunbookInput{Runbook: *loaded.Runbook, Params: params, Cluster: *cluster, Children: map[string]runbooks.Runbook{}}
	for name, child := range loaded.Children {
		in.Children[name] = *child
	}
	return in, nil
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
func (s *Server) start(ctx context.Context, req *startRequest, in workflows.RunbookInput) (*started, error) {
	id := RunbookID(req.Runbook, req.Cluster)
	key := requestKey(req, in)
	// The latest run under this ID: the same request answers with it; a
	// different one is refused while it runs.
	if prev, err := s.describe(ctx, id, ""); err == nil {
		running := prev.status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		if prev.request == key && (running || req.RequestID != "") {
			return s.existing(ctx, req, id, prev.runID)
		}
		if running {
			return nil, s.busyError(req.Runbook, req.Cluster, id, prev.runID, prev.by)
		}
	} else if !isNotFound(err) {
		return nil, err
	}
	// Runs started by `kedge run` are RUNBOOK/CLUSTER/...: refuse beside them too.
	if other, runID, err := s.runningBeside(ctx, id); err != nil {
		return nil, err
	} else if other != "" {
		return nil, s.busyError(req.Runbook, req.Cluster, other, runID, "")
	}
	// Started as `kedge run` starts runbooks, so the Web UI lists and
	// filters it the same way.
	md := workflows.Describe(in)
	run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       id,
		TaskQueue:                                s.taskQueue(),
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo:                                     map[string]any{memoRequest: key, memoBy: req.Subject.String()},
		TypedSearchAttributes:                    md.SearchAttributes,
		StaticSummary:                            md.StaticSummary + ", from " + req.Subject.String(),
		StaticDetails:                            md.StaticDetails,
	}, md.WorkflowType, in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		// Another request won the race between the look-up and the start.
		prev, derr := s.describe(ctx, id, "")
		if derr != nil {
			return nil, derr
		}
		if prev.request == key {
			return s.existing(ctx, req, id, prev.runID)
		}
		return nil, s.busyError(req.Runbook, req.Cluster, id, prev.runID, prev.by)
	}
	if searchattr.IsMissing(err) {
		return nil, fmt.Errorf("start %s: the namespace lacks Kedge's search attributes: run `kedge setup` once for it: %w", id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", id, err)
	}
	st := &started{WorkflowID: id, RunID: run.GetRunID(), URL: s.link(id, run.GetRunID())}
	return st, s.follow(ctx, req, in, st)
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
			"workflowId", st.WorkflowID, "host", urlHost(req.ResponseURL))
		return nil
	}
	fin := FollowInput{
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
	}, FollowWorkflow, fin)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &already) {
		return fmt.Errorf("start the chat follower of %s: %w", st.WorkflowID, err)
	}
	return nil
}

// runInfo is what a run's description tells.
type runInfo struct {
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
	info := d.GetWorkflowExecutionInfo()
	ri := runInfo{runID: info.GetExecution().GetRunId(), status: info.GetStatus(), typeName: info.GetType().GetName()}
	if p := info.GetParentExecution(); p != nil {
		ri.parent = p.GetWorkflowId()
	}
	dc := s.dataConverter()
	for k, dst := range map[string]*string{memoRequest: &ri.request, memoBy: &ri.by} {
		if p, ok := info.GetMemo().GetFields()[k]; ok {
			_ = dc.FromPayload(p, dst)
		}
	}
	return ri, nil
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// runningBeside finds a running top-level runbook whose ID is under
// prefix+"/" (as `kedge run` names them). Whatever the workflow type a
// runbook runs as, a top-level run that is not a rollout, a compensation
// or a chat follower is a runbook run.
func (s *Server) runningBeside(ctx context.Context, prefix string) (string, string, error) {
	q := fmt.Sprintf("ExecutionStatus = 'Running' AND WorkflowId STARTS_WITH '%s/'", strings.ReplaceAll(prefix, "'", ""))
	resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: s.namespace(), Query: q, PageSize: 100})
	if err != nil {
		return "", "", fmt.Errorf("list runs of %s: %w", prefix, err)
	}
	for _, e := range resp.GetExecutions() {
		if e.GetParentExecution() == nil && isRunbookType(e.GetType().GetName()) {
			return e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), nil
		}
	}
	return "", "", nil
}

// isRunbookType says whether a top-level workflow of this type runs a
// runbook: runbooks run as "runbook" or under their own names.
func isRunbookType(name string) bool {
	switch name {
	case workflows.RolloutWorkflow, workflows.CompensateWorkflow, FollowWorkflow, "":
		return false
	}
	return true
}

func urlHost(u string) string {
	rest, ok := strings.CutPrefix(u, "https://")
	if !ok {
		rest, _ = strings.CutPrefix(u, "http://")
	}
	host, _, _ := strings.Cut(rest, "/")
	return host
}
