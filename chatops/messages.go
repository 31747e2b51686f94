package chatops

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
	inChannel = "in_channel"
	ephemeral = "ephemeral"
)

// ButtonValue is what a decision button carries: the run a person started
// and the pause the button decides.
type ButtonValue struct {
	Workflow string `json:"w"`
	runs.Pause
}

// esc escapes text for Slack's mrkdwn.
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// slackLink is <url|label> in mrkdwn.
func slackLink(url, label string) string {
	return "<" + strings.NewReplacer("|", "%7C", ">", "%3E").Replace(url) + "|" + esc(label) + ">"
}

func textMessage(responseType, text string) *slack.WebhookMessage {
	return &slack.WebhookMessage{ResponseType: responseType, Text: text}
}

// stateIcon shows a state at a glance.
func stateIcon(state string) string {
	switch state {
	case workflows.StateSucceeded:
		return ":white_check_mark:"
	case workflows.StateFailed, workflows.StateUndoFailed:
		return ":x:"
	case workflows.StateRunning, workflows.StateUndoing:
		return ":arrows_counterclockwise:"
	case workflows.StateWaiting:
		return ":double_vertical_bar:"
	case workflows.StateSkipped, workflows.StateNotRun:
		return ":white_circle:"
	case workflows.StateCancelled, workflows.StateUndone:
		return ":leftwards_arrow_with_hook:"
	}
	return ":hourglass:"
}

// stepLines is one line per step of a run; rollouts say how far their
// items got (from items, keyed by step ID).
func stepLines(p workflows.Progress, items map[string][]workflows.StepProgress) []string {
	var lines []string
	for _, st := range p.Steps {
		line := fmt.Sprintf("%s `%s` %s", stateIcon(st.State), esc(st.ID), st.State)
		if its, ok := items[st.ID]; ok && len(its) > 0 {
			line += " — " + itemCounts(its)
		}
		if st.Decision != nil {
			line += fmt.Sprintf(" — %sd by %s", st.Decision.Decision, esc(st.Decision.By))
		}
		if st.LastError != "" && st.State != workflows.StateSucceeded {
			line += ": " + esc(clipText(st.LastError, 300))
		}
		lines = append(lines, line)
	}
	return lines
}

// itemCounts is "2 succeeded, 1 failed, 2 pending" for a rollout's items.
func itemCounts(its []workflows.StepProgress) string {
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

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return clip(s[:n]) + "…"
}

// pauseMessage asks for a decision at a pause, with Continue and Abort
// buttons.
func pauseMessage(in FollowInput, p runs.Pause) *slack.WebhookMessage {
	var text string
	switch p.Kind {
	case runs.PauseApproval:
		text = fmt.Sprintf(":double_vertical_bar: *%s* on *%s* waits for approval at `%s`: %s",
			esc(in.Runbook), esc(in.Cluster), esc(p.Step), esc(p.Prompt))
	default:
		text = fmt.Sprintf(":double_vertical_bar: *%s* on *%s* is paused: the rollout `%s` is over its failure budget (%s)",
			esc(in.Runbook), esc(in.Cluster), esc(p.Step), esc(p.Prompt))
		for i, f := range p.Failed {
			if i == 5 {
				text += fmt.Sprintf("\n• … and %d more", len(p.Failed)-5)
				break
			}
			text += "\n• " + esc(clipText(f, 300))
		}
	}
	text += "\n" + slackLink(in.Link, in.WorkflowID)
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
		ResponseType: inChannel,
		Text:         text,
		Blocks: &slack.Blocks{BlockSet: []slack.Block{
			slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, clipText(text, 2900), false, false), nil, nil),
			slack.NewActionBlock("kedge.decide", cont, abort),
		}},
	}
}

// resultMessage reports how a run ended.
func resultMessage(in FollowInput, p workflows.Progress, items map[string][]workflows.StepProgress, runErr string, took time.Duration) *slack.WebhookMessage {
	head := fmt.Sprintf(":white_check_mark: *%s* on *%s* succeeded", esc(in.Runbook), esc(in.Cluster))
	switch p.State {
	case workflows.StateSucceeded:
	case workflows.StateCancelled:
		head = fmt.Sprintf(":leftwards_arrow_with_hook: *%s* on *%s* was cancelled", esc(in.Runbook), esc(in.Cluster))
	default:
		head = fmt.Sprintf(":x: *%s* on *%s* failed", esc(in.Runbook), esc(in.Cluster))
	}
	if took > 0 {
		head += " in " + took.Round(time.Second).String()
	}
	if runErr != "" {
		head += ": " + esc(clipText(runErr, 500))
	}
	lines := append([]string{head}, stepLines(p, items)...)
	lines = append(lines, fmt.Sprintf("started by %s · %s", esc(in.By), slackLink(in.Link, in.WorkflowID)))
	return textMessage(inChannel, strings.Join(lines, "\n"))
}

// progressMessage is a run's progress so far.
func progressMessage(in FollowInput, p workflows.Progress, items map[string][]workflows.StepProgress) *slack.WebhookMessage {
	lines := append([]string{fmt.Sprintf(":arrows_counterclockwise: *%s* on *%s* is running", esc(in.Runbook), esc(in.Cluster))}, stepLines(p, items)...)
	lines = append(lines, slackLink(in.Link, in.WorkflowID))
	return textMessage(inChannel, strings.Join(lines, "\n"))
}
