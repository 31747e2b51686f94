package slackmsg

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/workflows"
)

// Action IDs of the decision buttons.
const (
	ActionContinue = "kedge.continue"
	ActionAbort    = "kedge.abort"
	ActionRestore  = "kedge.restore"
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

func TextMessage(responseType, text string) *slack.WebhookMessage {
	return &slack.WebhookMessage{ResponseType: responseType, Text: text}
}

// StepLines is one line per step of a run, from its view: the state,
// how far its hosts or a rollout's items got, retries, the decision taken
// at an approval, and the error.
func StepLines(v workflows.View) []string {
	var lines []string
	for _, r := range v.Rows {
		if r.Depth > 0 {
			continue
		}
		line := fmt.Sprintf("%s `%s` %s", workflows.StateEmoji(r.State), Esc(r.Step), r.State)
		if r.PartsText != "" {
			line += " — " + Esc(r.PartsText)
		}
		if r.Attempts > 1 {
			line += fmt.Sprintf(" (attempt %d)", r.Attempts)
		}
		if r.Decided != "" {
			line += " — " + Esc(r.Decided)
		}
		if r.Error != "" {
			line += ": " + Esc(ClipText(r.Error, 300))
		}
		lines = append(lines, line)
	}
	return lines
}

// PauseMessage asks for a decision at a pause, with Continue and Abort
// buttons, and Restore where the pause takes it.
func PauseMessage(in workflows.ChatFollowInput, p runs.Pause) *slack.WebhookMessage {
	var text string
	switch {
	case p.Kind == runs.PauseApproval:
		text = fmt.Sprintf("%s *%s* on *%s* waits for approval at `%s`: %s", workflows.StateEmoji(workflows.StateWaiting),
			Esc(in.Runbook), Esc(in.Cluster), Esc(p.Step), Esc(p.Prompt))
	case p.Kind == runs.PauseRollout && p.Alerts:
		text = fmt.Sprintf("%s *%s* on *%s* is paused: its alerts held the rollout `%s` too long (%s); Continue holds it again until they clear", workflows.StateEmoji(workflows.StateWaiting),
			Esc(in.Runbook), Esc(in.Cluster), Esc(p.Step), Esc(p.Prompt))
	default:
		text = fmt.Sprintf("%s *%s* on *%s* is paused: the rollout `%s` is over its failure budget (%s)", workflows.StateEmoji(workflows.StateWaiting),
			Esc(in.Runbook), Esc(in.Cluster), Esc(p.Step), Esc(p.Prompt))
		for i, f := range p.Failed {
			if i == 5 {
				text += fmt.Sprintf("\n• … and %d more", len(p.Failed)-5)
				break
			}
			text += "\n• " + Esc(ClipText(f, 300))
		}
	}
	text += "\n" + Link(in.Link, in.WorkflowID)
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
	buttons := []slack.BlockElement{cont, abort}
	if p.Restore {
		restore := slack.NewButtonBlockElement(ActionRestore, string(value), slack.NewTextBlockObject(slack.PlainTextType, "Restore", false, false))
		restore.Style = slack.StyleDanger
		restore.Confirm = slack.NewConfirmationBlockObject(
			slack.NewTextBlockObject(slack.PlainTextType, "Restore?", false, false),
			slack.NewTextBlockObject(slack.PlainTextType, "Abort the rollout, undo what the run did, then run its restore steps (cluster-upgrade: etcd back to the snapshot it took first; what was written since is lost). The restore asks for its own approval.", false, false),
			slack.NewTextBlockObject(slack.PlainTextType, "Restore", false, false),
			slack.NewTextBlockObject(slack.PlainTextType, "Cancel", false, false))
		buttons = append(buttons, restore)
	}
	return &slack.WebhookMessage{
		ResponseType: InChannel,
		Text:         text,
		Blocks: &slack.Blocks{BlockSet: []slack.Block{
			slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, ClipText(text, 2900), false, false), nil, nil),
			slack.NewActionBlock("kedge.decide", buttons...),
		}},
	}
}

// ResultMessage reports how a run ended: p holds its rollouts' items
// (runs.ExpandRollouts).
func ResultMessage(in workflows.ChatFollowInput, p workflows.Progress, runErr string, took time.Duration) *slack.WebhookMessage {
	v := workflows.NewView(p, workflows.ViewOptions{})
	state, verb := workflows.StateFailed, "failed"
	switch p.State {
	case workflows.StateSucceeded:
		state, verb = p.State, "succeeded"
	case workflows.StateCancelled:
		state, verb = p.State, "was cancelled"
	}
	head := fmt.Sprintf("%s *%s* on *%s* %s", workflows.StateEmoji(state), Esc(in.Runbook), Esc(in.Cluster), verb)
	if took > 0 {
		head += " in " + took.Round(time.Second).String()
	}
	if runErr != "" {
		head += ": " + Esc(ClipText(runErr, 500))
	}
	lines := append([]string{head}, StepLines(v)...)
	lines = append(lines, fmt.Sprintf("started by %s · %s", Esc(in.By), Link(in.Link, in.WorkflowID)))
	return TextMessage(InChannel, strings.Join(lines, "\n"))
}

// ProgressMessage is a run's progress so far: p holds its rollouts' items
// (runs.ExpandRollouts).
func ProgressMessage(in workflows.ChatFollowInput, p workflows.Progress) *slack.WebhookMessage {
	v := workflows.NewView(p, workflows.ViewOptions{})
	head := fmt.Sprintf("%s *%s* on *%s* is %s", workflows.StateEmoji(v.State), Esc(in.Runbook), Esc(in.Cluster), v.Summary)
	lines := append([]string{head}, StepLines(v)...)
	lines = append(lines, Link(in.Link, in.WorkflowID))
	return TextMessage(InChannel, strings.Join(lines, "\n"))
}
