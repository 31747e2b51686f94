package starter

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"kedge.dev/kedge/slackmsg"
	"kedge.dev/kedge/workflows"
)

// agreeProgress has a bit of everything: a fan-out step retrying with a
// host still pending, a child runbook, a rollout whose items ended every
// way, an approval waiting, a step cancelled while it retried, and one not
// started.
func agreeProgress() workflows.Progress {
	return workflows.Progress{WorkflowID: "swap/mercury/x", Runbook: "swap", Cluster: "mercury", State: workflows.StateRunning, Steps: []workflows.StepProgress{
		{ID: "preflight", Kind: "action", Action: "host.run", State: workflows.StateRunning, Attempts: 2, LastError: "timed out",
			Hosts: []workflows.HostProgress{
				{Name: "h1", State: workflows.StateSucceeded, Attempts: 1},
				{Name: "h2", State: workflows.StateRunning, Attempts: 2, LastError: "timed out"},
				{Name: "h3", State: workflows.StatePending},
			}},
		{ID: "upgrade", Kind: "runbook", State: workflows.StateSucceeded, Child: "swap/mercury/x/upgrade", Attempts: 1},
		{ID: "workers", Kind: "rollout", State: workflows.StateRunning, Child: "swap/mercury/x/workers", Attempts: 1,
			Items: []workflows.StepProgress{
				{ID: "w1", Kind: "runbook", State: workflows.StateSucceeded, Child: "mercury/node/w1"},
				{ID: "w2", Kind: "runbook", State: workflows.StateFailed, Child: "mercury/node/w2", LastError: "drain timed out"},
				{ID: "w3", Kind: "runbook", State: workflows.StateCancelled, Child: "mercury/node/w3"},
				{ID: "w4", Kind: "runbook", State: workflows.StateRunning, Child: "mercury/node/w4"},
				{ID: "w5", Kind: "runbook", State: workflows.StatePending},
			}},
		{ID: "gate", Kind: "approval", State: workflows.StateWaiting, Prompt: "go on?"},
		{ID: "cleanup", Kind: "action", Action: "host.run", State: workflows.StateCancelled, Attempts: 3, LastError: "connection refused"},
		{ID: "post", Kind: "action", Action: "kedge.check", State: workflows.StatePending},
	}}
}

// shown is what one front end says of a step.
type shown struct {
	state  string
	counts map[string]int // of its hosts or items
	err    bool           // it shows the step's last error
}

var countsText = regexp.MustCompile(`(\d+) (?:hosts|items): ([0-9a-z, -]+)`)

// readLine reads a step's state, counts and error from a rendered line
// that holds the step's ID as a word followed by its state.
func readLine(line, id, lastError string) (shown, bool) {
	f := strings.Fields(strings.ReplaceAll(line, "`", " "))
	for i := 0; i+1 < len(f); i++ {
		if f[i] != id {
			continue
		}
		s := shown{state: strings.TrimRight(f[i+1], ":,"), err: lastError != "" && strings.Contains(line, lastError)}
		if m := countsText.FindStringSubmatch(line); m != nil {
			s.counts = map[string]int{}
			for _, part := range strings.Split(m[2], ", ") {
				n, state, _ := strings.Cut(strings.TrimSpace(part), " ")
				k, _ := strconv.Atoi(n)
				s.counts[state] = k
			}
		}
		return s, true
	}
	return shown{}, false
}

func findStep(text, id, lastError string) (shown, bool) {
	for _, line := range strings.Split(text, "\n") {
		if s, ok := readLine(line, id, lastError); ok {
			return s, true
		}
	}
	return shown{}, false
}

// The terminal's lines, `kedge watch --output json` and the chat messages
// say the same of every step: its state, how many of its hosts or items
// are in each state, and whether its last error shows.
func TestFrontEndsAgreeOnStatesCountsAndErrors(t *testing.T) {
	p := agreeProgress()
	var lines strings.Builder
	newProgressPrinter(&lines, true, p.WorkflowID).update(p)
	chatText := slackmsg.ProgressMessage(workflows.ChatFollowInput{WorkflowID: p.WorkflowID, Runbook: p.Runbook, Cluster: p.Cluster}, p).Text
	var js strings.Builder
	if err := writeJSON(&js, watchJSON(p)); err != nil {
		t.Fatal(err)
	}
	var fromJSON workflows.Progress
	if err := json.Unmarshal([]byte(js.String()), &fromJSON); err != nil {
		t.Fatal(err)
	}
	// The view under "view" says the same as the progress beside it.
	var withView struct{ View workflows.View }
	if err := json.Unmarshal([]byte(js.String()), &withView); err != nil {
		t.Fatal(err)
	}
	viewText := ""
	for _, r := range withView.View.Rows {
		if r.Depth == 0 {
			viewText += fmt.Sprintf("%s %s [%s]: %s\n", r.Step, r.State, r.PartsText, r.Error)
		}
	}
	errorShown := map[bool]int{}
	for i, s := range p.Steps {
		js := fromJSON.Steps[i]
		truth := map[string]int{}
		for _, h := range js.Hosts {
			truth[h.State]++
		}
		for _, it := range js.Items {
			truth[it.State]++
		}
		byEnd := map[string]shown{}
		for name, text := range map[string]string{"terminal": lines.String(), "chat": chatText, "view": viewText} {
			got, ok := findStep(text, s.ID, s.LastError)
			if !ok {
				t.Errorf("%s does not show step %s:\n%s", name, s.ID, text)
				continue
			}
			byEnd[name] = got
			if got.state != js.State {
				t.Errorf("%s shows %s %s, the JSON %s", name, s.ID, got.state, js.State)
			}
			if len(truth) > 0 && !equalCounts(got.counts, truth) {
				t.Errorf("%s counts %s's parts as %v, the JSON holds %v", name, s.ID, got.counts, truth)
			}
		}
		if a, b, c := byEnd["terminal"], byEnd["chat"], byEnd["view"]; s.LastError != "" && (a.err != b.err || a.err != c.err) {
			t.Errorf("step %s (%s): shows its error: the terminal %v, chat %v, the JSON view %v", s.ID, s.State, a.err, b.err, c.err)
		}
		errorShown[byEnd["terminal"].err]++
	}
	if errorShown[true] == 0 {
		t.Error("no step showed its error: the check above checks nothing")
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestRolloutStepLineCountsItemsAndShowsThePause(t *testing.T) {
	s := workflows.StepProgress{ID: "workers", Kind: "rollout", State: workflows.StateRunning, Child: "swap/workers", Paused: true,
		Items: []workflows.StepProgress{
			{ID: "w-1", State: workflows.StateSucceeded}, {ID: "w-2", State: workflows.StateFailed},
			{ID: "w-3", State: workflows.StatePending}, {ID: "w-4", State: workflows.StatePending},
		}}
	got, _ := rowLine(workflows.NewView(workflows.Progress{Steps: []workflows.StepProgress{s}}, workflows.ViewOptions{}).Rows[0], "swap")
	for _, want := range []string{"rollout swap/workers", "[4 items: 1 succeeded, 1 failed, 2 pending]", "PAUSED", "kedge approve swap --decision continue|abort"} {
		if !strings.Contains(got, want) {
			t.Errorf("line %q lacks %q", got, want)
		}
	}
	var out strings.Builder
	pr := newProgressPrinter(&out, true, "swap")
	pr.update(workflows.Progress{Steps: []workflows.StepProgress{s}})
	if !strings.Contains(out.String(), "workers/w-2") || strings.Contains(out.String(), "workers/w-3") {
		t.Errorf("item lines: want the failed item and no pending ones:\n%s", out.String())
	}
}

// A rollout its alert gate paused says why, not its failure budget.
func TestRolloutStepLineShowsWhyItsAlertsPausedIt(t *testing.T) {
	s := workflows.StepProgress{ID: "workers", Kind: "rollout", State: workflows.StateRunning, Child: "swap/workers", Paused: true,
		Waiting: "alerts firing: NodeDown, holding for 30m0s (pauseAfter 30m0s)",
		Items:   []workflows.StepProgress{{ID: "w-1", State: workflows.StatePending}}}
	got, _ := rowLine(workflows.NewView(workflows.Progress{Steps: []workflows.StepProgress{s}}, workflows.ViewOptions{}).Rows[0], "swap")
	want := "PAUSED (alerts firing: NodeDown, holding for 30m0s (pauseAfter 30m0s)): kedge approve swap --decision continue|abort"
	if !strings.Contains(got, want) || strings.Contains(got, "failure budget") {
		t.Errorf("line %q, want %q", got, want)
	}
}

// A waiting approval's line clips its prompt to 80 characters; the
// whole prompt follows it, wrapped, for the operator to decide on.
func TestWaitingApprovalShowsItsWholePrompt(t *testing.T) {
	prompt := "Restore etcd of mercury from mercury/etcd/20261127T063911.252Z-rev374.snap.kseal, taken 2026-11-27T06:39:11Z (1m1s ago) at revision 374? Everything written since then is lost."
	p := workflows.Progress{WorkflowID: "etcd-restore/mercury", State: workflows.StateRunning, Steps: []workflows.StepProgress{
		{ID: "approve", Kind: "approval", State: workflows.StateWaiting, Prompt: prompt},
		{ID: "done", Kind: "approval", State: workflows.StateSucceeded, Prompt: prompt},
	}}
	var out strings.Builder
	newProgressPrinter(&out, true, p.WorkflowID).update(p)
	text := out.String()
	if got := strings.Join(strings.Fields(text), " "); !strings.Contains(got, "at revision 374? Everything written since then is lost.") {
		t.Errorf("the waiting gate's whole prompt is not shown:\n%s", text)
	}
	if strings.Count(text, "revision 374") != 1 {
		t.Errorf("the prompt is shown for a gate no longer waiting:\n%s", text)
	}
	for _, l := range strings.Split(text, "\n") {
		if len(l) > 200 {
			t.Errorf("line not wrapped (%d): %q", len(l), l)
		}
	}
}
