package slackmsg

import (
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"kedge.dev/kedge/workflows"
)

// A rollout-shaped run (one with rollout steps: os-update, kubelet image
// swaps, cluster upgrades) is told in chat wave by wave: a message when a
// wave starts, when one of its nodes ends, when it waits for its window
// or for a person, and when it ends, rather than the whole step list.

// RolloutShaped says whether a run has rollout steps: chat follows it
// wave by wave.
func RolloutShaped(p workflows.Progress) bool {
	for _, s := range p.Steps {
		if s.Kind == "rollout" {
			return true
		}
	}
	return false
}

// WaveKey names where a rollout-shaped run's waves are: it changes when a
// wave starts or ends, one of its items ends, it starts or stops waiting
// for its window (a delay between items does not count: it comes with
// every item), pauses, or an approval starts or stops waiting. "" while
// nothing has started.
func WaveKey(p workflows.Progress) string {
	var parts []string
	for _, s := range p.Steps {
		switch {
		case s.State == workflows.StatePending:
		case s.Kind == "rollout":
			c := itemCounts(s)
			waiting := s.Waiting
			if strings.Contains(waiting, "between items") {
				waiting = ""
			}
			parts = append(parts, fmt.Sprintf("%s|%s|%d|%d|%s|%v", s.ID, s.State, c.Of(workflows.StateSucceeded), failedOf(c), waiting, s.Paused))
		case s.Kind == "approval":
			parts = append(parts, s.ID+"|"+s.State)
		}
	}
	return strings.Join(parts, ";")
}

func itemCounts(s workflows.StepProgress) workflows.Counts {
	states := make([]string, len(s.Items))
	for i, it := range s.Items {
		states[i] = it.State
	}
	return workflows.CountStates(states)
}

// failedOf is how many items ended without succeeding (skipped ones
// aside).
func failedOf(c workflows.Counts) int {
	return c.Ended() - c.Of(workflows.StateSucceeded) - c.Of(workflows.StateSkipped)
}

// WaveLines is one line per wave that started and per approval waiting:
// a wave of one item says how it is ("osup-worker-1 done (rebooted into
// 6.1.0-21-amd64)", "at `drain`"), a bigger one counts ("3/4 done,
// osup-worker-4 at `drain`"); then what it waits for ("waiting for the
// next window: Sat 02:00 UTC"). items holds, by workflow ID, the progress
// of item runbooks the caller read: the running ones (their current
// step) and the one item of a one-item wave (its outputs).
func WaveLines(p workflows.Progress, items map[string]workflows.Progress) []string {
	var lines []string
	for _, s := range p.Steps {
		switch {
		case s.State == workflows.StatePending:
			continue
		case s.Kind == "approval":
			if s.WaitsForApproval() {
				lines = append(lines, fmt.Sprintf("%s `%s`: waiting for approval", workflows.StateEmoji(workflows.StateWaiting), Esc(s.ID)))
			}
			continue
		case s.Kind != "rollout" || len(s.Items) == 0:
			continue
		}
		line := fmt.Sprintf("%s `%s`: ", workflows.StateEmoji(s.State), Esc(s.ID))
		if len(s.Items) == 1 {
			it := s.Items[0]
			line += Esc(it.ID) + " " + itemPhrase(it, items[it.Child])
		} else {
			c := itemCounts(s)
			line += fmt.Sprintf("%d/%d done", c.Of(workflows.StateSucceeded), len(s.Items))
			if f := failedOf(c); f > 0 {
				line += fmt.Sprintf(", %d failed", f)
			}
			for _, it := range s.Items {
				if it.State == workflows.StateRunning || it.State == workflows.StateWaiting {
					line += ", " + Esc(it.ID) + " " + itemPhrase(it, items[it.Child])
				}
			}
		}
		if s.Waiting != "" {
			line += "; " + Esc(s.Waiting)
		}
		if s.Paused {
			line += "; paused at its failure budget"
		}
		lines = append(lines, line)
	}
	return lines
}

// itemPhrase says where one item is: done (with what its runbook's
// outputs say of a reboot), at its current step, or failed and why.
func itemPhrase(it workflows.StepProgress, cp workflows.Progress) string {
	switch it.State {
	case workflows.StateSucceeded:
		return "done" + rebootNote(cp.Outputs)
	case workflows.StateRunning, workflows.StateWaiting:
		for _, s := range cp.Steps {
			if s.State == workflows.StateRunning || s.State == workflows.StateWaiting {
				return "at `" + Esc(s.ID) + "`"
			}
		}
		return "running"
	case workflows.StateFailed:
		if it.LastError != "" {
			return "failed: " + Esc(ClipText(it.LastError, 200))
		}
	}
	return it.State
}

// rebootNote reads the outputs of a node runbook that says whether it
// rebooted and what it booted (os-update-node's rebooted and booted).
func rebootNote(outputs map[string]any) string {
	booted, ok := outputs["booted"]
	if !ok || fmt.Sprint(booted) == "" {
		return ""
	}
	if fmt.Sprint(outputs["rebooted"]) == "true" {
		return fmt.Sprintf(" (rebooted into %s)", Esc(fmt.Sprint(booted)))
	}
	return fmt.Sprintf(" (nothing to update: %s)", Esc(fmt.Sprint(booted)))
}

// WaveMessage is a rollout-shaped run's waves so far: p holds its
// rollouts' items (runs.ExpandRollouts), items as WaveLines takes them.
func WaveMessage(in workflows.ChatFollowInput, p workflows.Progress, items map[string]workflows.Progress) *slack.WebhookMessage {
	head := fmt.Sprintf("%s *%s* on *%s*:", workflows.StateEmoji(p.State), Esc(in.Runbook), Esc(in.Cluster))
	lines := append([]string{head}, WaveLines(p, items)...)
	lines = append(lines, Link(in.Link, in.WorkflowID))
	return TextMessage(InChannel, strings.Join(lines, "\n"))
}
