package chat

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"kedge.dev/kedge/internal/runs"
	"kedge.dev/kedge/workflows"
)

// Action IDs of the decision buttons.
const (
	ActionContinue = "kedge.continue"
	ActionAbort    = "kedge.abort"
)

// Response types of Slack messages.
const (
	InChannel = "in_channel"
	Ephemeral = "ephemeral"
)

// ButtonValue is what a decision button carries: the run a person started
// and the pause the button decides.
type ButtonValue struct {
	Workflow string `json:"w"`
	runs.Pause
}

// Esc escapes text for Slack's mrkdwn.
func Esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// SlackLink is <url|label> in mrkdwn.
func SlackLink(url, label string) string {
	return "<" + strings.NewReplacer("|", "%7C", ">", "%3E").Replace(url) + "|" + Esc(label) + ">"
}

func TextMessage(responseType, text string) *slack.WebhookMessage {
	return &slack.WebhookMessage{ResponseType: responseType, Text: text}
}

// StateIcon shows a state at a glance in Slack.
func StateIcon(state string) string { return workflows.StateEmoji(state) }

// StepLines is one line per step of a run; rollouts say how far their
// items got (from items, keyed by step ID).
func StepLines(p workflows.Progress, items map[string][]workflows.StepProgress) []string {
	var lines []string
	for _, st := range p.Steps {
		line := fmt.Sprintf("%s `%s` %s", StateIcon(st.State), Esc(st.ID), st.State)
		if its, ok := items[st.ID]; ok && len(its) > 0 {
			line += " — " + ItemCounts(its)
		}
		if st.Decision != nil {
			line += fmt.Sprintf(" — %sd by %s", st.Decision.Decision, Esc(st.Decision.By))
		}
		if st.LastError != "" && st.State != workflows.StateSucceeded {
			line += ": " + Esc(ClipText(st.LastError, 300))
		}
		lines = append(lines, line)
	}
	return lines
}

// ItemCounts is "2 succeeded, 1 failed, 2 pending" for a rollout's items.
func ItemCounts(its []workflows.StepProgress) string {
	count := map[string]int{}
	var order []string
	for _, it := range its {
		if count[it.State] == 0 {
			order = append(order, it.State)
		}
		count[it.State]++
	}
	var parts []string
	for _, st := range []string{workflows.StateSucceeded, workflows.StateRunning, workflows.StateFailed, workflows.StatePending} {
		if count[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[st], st))
		}
	}
	for _, st := range order {
		switch st {
		case workflows.StateSucceeded, workflows.StateRunning, workflows.StateFailed, workflows.StatePending:
		default:
			parts = append(parts, fmt.Sprintf("%d %s", count[st], st))
		}
	}
	return fmt.Sprintf("%d items: %s", len(its), strings.Join(parts, ", "))
}

func ClipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Clip(s[:n]) + "…"
}

// PauseMessage asks for a decision at a pause, with Continue and Abort
// buttons.
func PauseMessage(in workflows.ChatFollowInput, p runs.Pause) *slack.WebhookMessage {
	var text string
	switch p.Kind {
	case runs.PauseApproval:
		text = fmt.Sprintf(":double_vertical_bar: *%s* on *%s* waits for approval at `%s`: %s",
			Esc(in.Runbook), Esc(in.Cluster), Esc(p.Step), Esc(p.Prompt))
	default:
		text = fmt.Sprintf(":double_vertical_bar: *%s* on *%s* is paused: the rollout `%s` is over its failure budget (%s)",
			Esc(in.Runbook), Esc(in.Cluster), Esc(p.Step), Esc(p.Prompt))
		for i, f := range p.Failed {
			if i == 5 {
				text += fmt.Sprintf("\n• … and %d more", len(p.Failed)-5)
				break
			}
			text += "\n• " + Esc(ClipText(f, 300))
		}
	}
	text += "\n" + SlackLink(in.Link, in.WorkflowID)
	value, _ := json.Marshal(ButtonValue{Workflow: in.WorkflowID, Pause: p})
	cont := slack.NewButtonBlockElement(ActionContinue, string(value), slack.NewTextBlockObject(slack.PlainTextType, "Continue", false, false))
	cont.Style = slack.StylePrimary
	abort := slack.NewButtonBlockElement(ActionAbort, string(value), slack.NewTextBlockObject(slack.PlainTextType, "Abort", false, false))
	abort.Style = slack.StyleDanger
	confirm := "Abort the rollout and undo the nodes it completed?"
	if p.Kind == runs.PauseApproval {
		confirm = "Reject this step? The runbook fails and undoes what it did."
	}
	abort.Confirm = slack.NewConfirmationBlockObject(
		slack.NewTextBlockObject(slack.PlainTextType, "Abort?", false, false),
		slack.NewTextBlockObject(slack.PlainTextType, confirm, false, false),
		slack.NewTextBlockObject(slack.PlainTextType, "Abort", false, false),
		slack.NewTextBlockObject(slack.PlainTextType, "Cancel", false, false))
	return &slack.WebhookMessage{
		ResponseType: InChannel,
		Text:         text,
		Blocks: &slack.Blocks{BlockSet: []slack.Block{
			slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, ClipText(text, 2900), false, false), nil, nil),
			slack.NewActionBlock("kedge.decide", cont, abort),
		}},
	}
}

// ResultMessage reports how a run ended.
func ResultMessage(in workflows.ChatFollowInput, p workflows.Progress, items map[string][]workflows.StepProgress, runErr string, took time.Duration) *slack.WebhookMessage {
	head := fmt.Sprintf(":white_check_mark: *%s* on *%s* succeeded", Esc(in.Runbook), Esc(in.Cluster))
	switch p.State {
	case workflows.StateSucceeded:
	case workflows.StateCancelled:
		head = fmt.Sprintf(":leftwards_arrow_with_hook: *%s* on *%s* was cancelled", Esc(in.Runbook), Esc(in.Cluster))
	default:
		head = fmt.Sprintf(":x: *%s* on *%s* failed", Esc(in.Runbook), Esc(in.Cluster))
	}
	if took > 0 {
		head += " in " + took.Round(time.Second).String()
	}
	if runErr != "" {
		head += ": " + Esc(ClipText(runErr, 500))
	}
	lines := append([]string{head}, StepLines(p, items)...)
	lines = append(lines, fmt.Sprintf("started by %s · %s", Esc(in.By), SlackLink(in.Link, in.WorkflowID)))
	return TextMessage(InChannel, strings.Join(lines, "\n"))
}

// ProgressMessage is a run's progress so far.
func ProgressMessage(in workflows.ChatFollowInput, p workflows.Progress, items map[string][]workflows.StepProgress) *slack.WebhookMessage {
	lines := append([]string{fmt.Sprintf(":arrows_counterclockwise: *%s* on *%s* is running", Esc(in.Runbook), Esc(in.Cluster))}, StepLines(p, items)...)
	lines = append(lines, SlackLink(in.Link, in.WorkflowID))
	return TextMessage(InChannel, strings.Join(lines, "\n"))
}
