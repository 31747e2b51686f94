package chatops

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"go.temporal.io/api/workflowservice/v1"

	"kedge.dev/kedge/internal/responseurl"
	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/slackmsg"
	"kedge.dev/kedge/workflows"
)

// HeaderOutcome tells machines what became of a request Slack is answered
// 200 for (Slack shows a reply only with 200): started, existing, refused,
// invalid, conflict, decided, failed, ok.
const HeaderOutcome = "X-Kedge-Outcome"

// authenticated reads, size-checks and verifies a Slack request and
// returns its form and what signed it. On failure it has answered.
func (s *Server) authenticated(w http.ResponseWriter, r *http.Request) (url.Values, signed, bool) {
	body, err := readBody(w, r)
	var sig signed
	if err == nil {
		sig, err = verifySlack(r.Header, body, s.SigningSecret)
	}
	if err == nil {
		if mt, _, perr := mime.ParseMediaType(r.Header.Get("Content-Type")); perr != nil || mt != "application/x-www-form-urlencoded" {
			err = refuse(http.StatusUnsupportedMediaType, "want Content-Type application/x-www-form-urlencoded")
		}
	}
	var form url.Values
	if err == nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.Form, r.PostForm = nil, nil
		if perr := r.ParseForm(); perr != nil {
			err = refuse(http.StatusBadRequest, "malformed form body: %v", perr)
		}
		form = r.PostForm
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if err != nil {
		s.auditUnauthenticated(r, err)
		w.Header().Set(HeaderOutcome, "refused")
		http.Error(w, err.Error(), statusOf(err))
		return nil, signed{}, false
	}
	return form, sig, true
}

// reply answers Slack (always 200, or Slack shows no message).
func reply(w http.ResponseWriter, outcome string, m *slack.WebhookMessage) {
	w.Header().Set(HeaderOutcome, outcome)
	writeJSON(w, http.StatusOK, m)
}

// outcomeOf names an error's outcome for HeaderOutcome.
func outcomeOf(err error) string {
	switch statusOf(err) {
	case http.StatusForbidden:
		return "refused"
	case http.StatusConflict:
		return "conflict"
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusNotFound:
		return "invalid"
	}
	return "failed"
}

func (s *Server) slashCommand(w http.ResponseWriter, r *http.Request) {
	_, sig, ok := s.authenticated(w, r)
	if !ok {
		return
	}
	sc, err := slack.SlashCommandParse(r)
	if err != nil || sc.UserID == "" {
		s.auditUnauthenticated(r, errors.New("slash command without user_id"))
		w.Header().Set(HeaderOutcome, "invalid")
		http.Error(w, "malformed slash command: no user_id", http.StatusBadRequest)
		return
	}
	sub := Subject{Source: SourceSlack, UserID: sc.UserID, UserName: sc.UserName, ChannelID: sc.ChannelID}
	cmd, err := ParseCommand(sc.Text)
	if err != nil {
		s.audit(sub, "command", "invalid", err.Error())
		reply(w, "invalid", slackmsg.TextMessage(slackmsg.Ephemeral, ":warning: "+slackmsg.Esc(err.Error())))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), ReplyWithin)
	defer cancel()
	var m *slack.WebhookMessage
	outcome := "ok"
	switch cmd.Name {
	case CmdHelp:
		m = slackmsg.TextMessage(slackmsg.Ephemeral, "```"+Usage+"```")
	case CmdSwapKubelet, CmdUpgrade, CmdOSUpdate, CmdRun:
		m, outcome, err = s.slackStart(ctx, sub, cmd, sc, sig)
	case CmdStatus:
		m, err = s.slackStatus(ctx, sub, cmd.ID)
	case CmdApprove, CmdAbort, CmdRestore:
		m, err = s.slackDecide(ctx, sub, cmd.ID, cmd.Name, "slack-cmd-"+hashOf(sc.TeamID, sc.UserID, sc.TriggerID, sc.Text))
		outcome = "decided"
	case CmdList:
		m, err = s.slackList(ctx, sub, cmd.Cluster)
	}
	if err != nil {
		reply(w, outcomeOf(err), slackmsg.TextMessage(slackmsg.Ephemeral, ":no_entry: "+slackmsg.Esc(messageOf(err))))
		return
	}
	reply(w, outcome, m)
}

func hashOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

func (s *Server) slackStart(ctx context.Context, sub Subject, cmd Command, sc slack.SlashCommand, sig signed) (*slack.WebhookMessage, string, error) {
	params := map[string]any{}
	for k, v := range cmd.Params {
		params[k] = v
	}
	req := &startRequest{Subject: sub, Runbook: cmd.Runbook, Cluster: cmd.Cluster, Params: params,
		ResponseURL: sc.ResponseURL, ChannelID: sc.ChannelID, Signed: sig}
	// Slack sends each command with its own trigger_id (and the same one
	// again when it retries): the command's request ID.
	if sc.TriggerID != "" {
		req.RequestID = sc.TeamID + "/" + sc.TriggerID
	}
	attrs := []any{"runbook", cmd.Runbook, "cluster", cmd.Cluster}
	in, err := s.prepare(req)
	if err != nil {
		s.audit(sub, "start", outcomeOf(err), err.Error(), attrs...)
		return nil, "", err
	}
	st, err := s.start(ctx, req, in)
	if err != nil {
		s.audit(sub, "start", outcomeOf(err), err.Error(), attrs...)
		return nil, "", err
	}
	shown := shownParams(cmd.Order, cmd.Params, in.Runbook.SecretParams())
	attrs = append(attrs, "workflowId", st.WorkflowID, "runId", st.RunID, "params", shown)
	if st.Existing {
		s.audit(sub, "start", "allowed", "repeated request: answered with the run it started", attrs...)
		return slackmsg.TextMessage(slackmsg.Ephemeral, fmt.Sprintf("This request already started %s · %s", "`"+slackmsg.Esc(st.WorkflowID)+"`", slackmsg.Link(st.URL, "Web UI"))), "existing", nil
	}
	s.audit(sub, "start", "allowed", "", attrs...)
	text := fmt.Sprintf(":rocket: <@%s> started *%s* on *%s*", slackmsg.Esc(sub.UserID), slackmsg.Esc(cmd.Runbook), slackmsg.Esc(cmd.Cluster))
	if shown != "" {
		text += " (" + slackmsg.Esc(shown) + ")"
	}
	text += fmt.Sprintf("\n`%s` · %s", slackmsg.Esc(st.WorkflowID), slackmsg.Link(st.URL, "Web UI"))
	if req.ResponseURL != "" && s.Config.responseURLAllowed(req.ResponseURL) {
		text += "\nProgress, decisions and the result will be posted here."
	}
	return slackmsg.TextMessage(slackmsg.InChannel, text), "started", nil
}

// shownParams prints the params as given, secret ones masked.
func shownParams(order []string, given map[string]string, secret []string) string {
	var parts []string
	for _, k := range order {
		v := given[k]
		if slices.Contains(secret, k) {
			v = "***"
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}

// readable resolves id to the run a person started and checks sub may
// see it (verb read) or decide in it (verb approve). Temporal is asked
// nothing unless the ID names a cluster sub may see runs on, and a run
// that is not there and one sub may not see get the same answer: nobody
// learns what runs where, or makes Kedge replay a history, by guessing.
func (s *Server) readable(ctx context.Context, sub Subject, id string, verb Verb) (string, workflows.Progress, error) {
	unseen := refuse(http.StatusNotFound, "no run %q that you may see", slackmsg.Clip(id))
	if !namesOneOf(id, s.Config.readableClusters(sub)) {
		return "", workflows.Progress{}, unseen
	}
	top, err := s.topOf(ctx, id)
	if err != nil {
		var he *httpError
		if errors.As(err, &he) {
			return "", workflows.Progress{}, unseen
		}
		return "", workflows.Progress{}, err
	}
	p, err := runs.Progress(ctx, s.Client, runs.Opener{Namespace: s.namespace(), DataConverter: s.dataConverter()}, top, "")
	if err != nil {
		return "", p, fmt.Errorf("query %s: %w", top, err)
	}
	if _, err := s.Config.Authorize(sub, VerbRead, p.Runbook, p.Cluster); err != nil {
		return "", workflows.Progress{}, unseen
	}
	if _, err := s.Config.Authorize(sub, verb, p.Runbook, p.Cluster); err != nil {
		return "", p, err
	}
	return top, p, nil
}

// namesOneOf reports whether a workflow ID names one of clusters (see
// workflows.ClustersOf).
func namesOneOf(id string, clusters []string) bool {
	for _, c := range workflows.ClustersOf(id) {
		if slices.Contains(clusters, c) {
			return true
		}
	}
	return false
}

func (s *Server) slackStatus(ctx context.Context, sub Subject, id string) (*slack.WebhookMessage, error) {
	top, p, err := s.readable(ctx, sub, id, VerbRead)
	if err != nil {
		s.audit(sub, "status", outcomeOf(err), err.Error(), "workflowId", id)
		return nil, err
	}
	s.audit(sub, "status", "allowed", "", "workflowId", top)
	runs.ExpandRollouts(ctx, s.Client, &p, nil)
	v := workflows.NewView(p, workflows.ViewOptions{})
	lines := []string{fmt.Sprintf("%s *%s* on *%s*: %s (started %s)", workflows.StateEmoji(v.State), slackmsg.Esc(p.Runbook), slackmsg.Esc(p.Cluster), slackmsg.Esc(v.Summary), p.StartedAt.UTC().Format(time.RFC3339))}
	lines = append(lines, slackmsg.StepLines(v)...)
	for _, pa := range runs.FindPauses(ctx, s.Client, p, top) {
		line := fmt.Sprintf(":double_vertical_bar: waits for a decision at `%s`: /kedge approve %s or /kedge abort %s", slackmsg.Esc(pa.Step), slackmsg.Esc(top), slackmsg.Esc(top))
		if pa.Restore {
			line += " (or /kedge restore " + slackmsg.Esc(top) + ")"
		}
		lines = append(lines, line)
	}
	lines = append(lines, slackmsg.Link(s.link(top, ""), top))
	return slackmsg.TextMessage(slackmsg.Ephemeral, strings.Join(lines, "\n")), nil
}

// slackDecide answers /kedge approve|abort|restore ID: action is the
// command's name.
func (s *Server) slackDecide(ctx context.Context, sub Subject, id, action, updateID string) (*slack.WebhookMessage, error) {
	ans := map[string]choice{CmdApprove: choiceProceed, CmdAbort: choiceStop, CmdRestore: choiceRestore}[action]
	top, p, err := s.readable(ctx, sub, id, ans.verb())
	if err != nil {
		s.audit(sub, action, outcomeOf(err), err.Error(), "workflowId", id)
		return nil, err
	}
	pauses := runs.FindPauses(ctx, s.Client, p, top)
	if id != top {
		pauses = slices.DeleteFunc(pauses, func(pa runs.Pause) bool { return pa.Target != id })
	}
	switch len(pauses) {
	case 0:
		err = refuse(http.StatusConflict, "nothing in %s waits for a decision", top)
	case 1:
	default:
		var names []string
		for _, pa := range pauses {
			names = append(names, pa.Target+" ("+pa.Step+")")
		}
		err = refuse(http.StatusConflict, "%d things in %s wait for a decision (%s): name one as the ID", len(pauses), top, strings.Join(names, ", "))
	}
	if err != nil {
		s.audit(sub, action, "invalid", err.Error(), "workflowId", top)
		return nil, err
	}
	pa := pauses[0]
	if err := ans.offered(pa); err != nil {
		s.audit(sub, action, "invalid", err.Error(), "workflowId", pa.Target, "step", pa.Step)
		return nil, err
	}
	d, err := runs.DecideAs(ctx, s.Client, pa, ans.decision(pa), sub.String(), "from Slack: /kedge "+action, updateID)
	if err != nil {
		s.audit(sub, action, "failed", err.Error(), "workflowId", pa.Target, "step", pa.Step)
		return nil, refuse(http.StatusConflict, "%s %s: %s", action, pa.Target, runs.RootMessage(err))
	}
	s.audit(sub, action, "allowed", "", "workflowId", pa.Target, "step", pa.Step, "decision", d.Decision, "runbook", p.Runbook, "cluster", p.Cluster)
	return slackmsg.TextMessage(slackmsg.InChannel, fmt.Sprintf("%s <@%s> %s `%s` of *%s* on *%s* · %s",
		ans.icon(), slackmsg.Esc(sub.UserID), ans.word(pa), slackmsg.Esc(pa.Step), slackmsg.Esc(p.Runbook), slackmsg.Esc(p.Cluster), slackmsg.Link(s.link(top, ""), top))), nil
}

// listLimit bounds the runs /kedge list shows.
const listLimit = 15

func (s *Server) slackList(ctx context.Context, sub Subject, cluster string) (*slack.WebhookMessage, error) {
	allowed := s.Config.readableClusters(sub)
	if cluster != "" {
		if _, err := s.Config.Authorize(sub, VerbRead, "", cluster); err != nil {
			s.audit(sub, "list", "refused", err.Error(), "cluster", cluster)
			return nil, err
		}
		allowed = []string{cluster}
	}
	if len(allowed) == 0 {
		err := &Refused{Msg: fmt.Sprintf("not allowed: %s may not see runs on any cluster (no rule in the ChatOps config allows it; ask an admin)", sub)}
		s.audit(sub, "list", "refused", err.Error())
		return nil, err
	}
	s.audit(sub, "list", "allowed", "", "clusters", strings.Join(allowed, ","))
	q := fmt.Sprintf("WorkflowType != '%s'", workflows.ChatFollowWorkflow)
	var lines []string
	var token []byte
	for pages := 0; pages < 5 && len(lines) < listLimit; pages++ {
		resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: s.namespace(), Query: q, PageSize: 100, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			parts := strings.Split(id, "/")
			if e.GetParentExecution() != nil || !runs.IsRunbookType(e.GetType().GetName()) || len(parts) < 2 || !slices.Contains(allowed, parts[1]) {
				continue
			}
			status := strings.ToLower(strings.TrimPrefix(e.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_"))
			lines = append(lines, fmt.Sprintf("• `%s` %s, started %s · %s", slackmsg.Esc(id), status,
				e.GetStartTime().AsTime().UTC().Format(time.RFC3339), slackmsg.Link(s.link(id, e.GetExecution().GetRunId()), "Web UI")))
			if len(lines) == listLimit {
				break
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if len(lines) == 0 {
		return slackmsg.TextMessage(slackmsg.Ephemeral, "No runs on "+slackmsg.Esc(strings.Join(allowed, ", "))+"."), nil
	}
	return slackmsg.TextMessage(slackmsg.Ephemeral, fmt.Sprintf("Runs on %s, newest first:\n%s", slackmsg.Esc(strings.Join(allowed, ", ")), strings.Join(lines, "\n"))), nil
}

// interactive answers a click on a Continue, Abort or Restore button.
func (s *Server) interactive(w http.ResponseWriter, r *http.Request) {
	form, _, ok := s.authenticated(w, r)
	if !ok {
		return
	}
	var ic slack.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &ic); err != nil {
		s.auditUnauthenticated(r, fmt.Errorf("malformed interaction payload: %w", err))
		w.Header().Set(HeaderOutcome, "invalid")
		http.Error(w, "malformed interaction payload", http.StatusBadRequest)
		return
	}
	sub := Subject{Source: SourceSlack, UserID: ic.User.ID, UserName: cmp.Or(ic.User.Name, ic.User.Username), ChannelID: cmp.Or(ic.Channel.ID, ic.Container.ChannelID)}
	buttons := map[string]choice{slackmsg.ActionContinue: choiceProceed, slackmsg.ActionAbort: choiceStop, slackmsg.ActionRestore: choiceRestore}
	var act *slack.BlockAction
	for _, a := range ic.ActionCallback.BlockActions {
		if _, ok := buttons[a.ActionID]; ok {
			act = a
			break
		}
	}
	var v slackmsg.ButtonValue
	switch {
	case ic.Type != slack.InteractionTypeBlockActions || act == nil || sub.UserID == "":
		s.audit(sub, "click", "invalid", "not a Kedge button click")
		w.Header().Set(HeaderOutcome, "invalid")
		http.Error(w, "not a Kedge button click", http.StatusBadRequest)
		return
	case json.Unmarshal([]byte(act.Value), &v) != nil || v.Workflow == "" || v.Target == "" || (v.Kind != runs.PauseRollout && v.Kind != runs.PauseApproval):
		s.audit(sub, "click", "invalid", "malformed button value")
		w.Header().Set(HeaderOutcome, "invalid")
		http.Error(w, "malformed button value", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), ReplyWithin)
	defer cancel()
	m, outcome := s.click(ctx, sub, v, buttons[act.ActionID], "slack-click-"+hashOf(ic.Team.ID, sub.UserID, act.ActionTs, ic.Container.MessageTs, act.ActionID, act.Value))
	if ic.ResponseURL != "" && s.Config.responseURLAllowed(ic.ResponseURL) {
		s.postAsync(ic.ResponseURL, m)
	}
	reply(w, outcome, m)
}

// click decides at the pause a button names, once per click.
func (s *Server) click(ctx context.Context, sub Subject, v slackmsg.ButtonValue, ans choice, updateID string) (*slack.WebhookMessage, string) {
	action := [...]string{choiceProceed: "continue", choiceStop: "abort", choiceRestore: "restore"}[ans]
	fail := func(err error) (*slack.WebhookMessage, string) {
		s.audit(sub, action, outcomeOf(err), err.Error(), "workflowId", v.Workflow, "target", v.Target, "step", v.Step)
		return slackmsg.TextMessage(slackmsg.Ephemeral, ":no_entry: "+slackmsg.Esc(messageOf(err))), outcomeOf(err)
	}
	top, p, err := s.readable(ctx, sub, v.Workflow, ans.verb())
	if err != nil {
		return fail(err)
	}
	if top != v.Workflow {
		return fail(refuse(http.StatusBadRequest, "the button names %s, which is not a runbook started by a person", v.Workflow))
	}
	var pa *runs.Pause
	for _, cand := range runs.FindPauses(ctx, s.Client, p, top) {
		if cand.Same(v.Pause) {
			pa = &cand
			break
		}
	}
	if pa == nil {
		return fail(refuse(http.StatusConflict, "%s no longer waits for this decision (it was decided, or it paused again since: use the newest buttons)", top))
	}
	if err := ans.offered(*pa); err != nil {
		return fail(err)
	}
	d, err := runs.DecideAs(ctx, s.Client, *pa, ans.decision(*pa), sub.String(), "from Slack", updateID)
	if err != nil {
		return fail(refuse(http.StatusConflict, "%s %s: %s", action, pa.Target, runs.RootMessage(err)))
	}
	s.audit(sub, action, "allowed", "", "workflowId", pa.Target, "step", pa.Step, "decision", d.Decision, "runbook", p.Runbook, "cluster", p.Cluster)
	m := slackmsg.TextMessage(slackmsg.InChannel, fmt.Sprintf("%s <@%s> %s `%s` of *%s* on *%s* · %s",
		ans.icon(), slackmsg.Esc(sub.UserID), ans.word(*pa), slackmsg.Esc(pa.Step), slackmsg.Esc(p.Runbook), slackmsg.Esc(p.Cluster), slackmsg.Link(s.link(top, ""), top)))
	m.ReplaceOriginal = true
	return m, "decided"
}

// postAsync posts a message to a response_url without holding up the
// answer to Slack.
func (s *Server) postAsync(responseURL string, m *slack.WebhookMessage) {
	hc := responseurl.NoRedirects(s.HTTP, 10*time.Second)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := slack.PostWebhookCustomHTTPContext(ctx, responseURL, hc, m); err != nil {
			s.log().Warn("kedge webhook: posting to a response_url failed", "host", responseurl.Host(responseURL), "error", err.Error())
		}
	}()
}
