package chatops

import (
	"fmt"
	"slices"
	"sort"
)

// Verb is what a request wants to do.
type Verb string

// Verbs a rule grants: start, approve and restore are listed per
// runbook; read (status, list) is granted by any rule that names the
// cluster. Approve does not grant restore: a restore rolls state back (a
// cluster-upgrade's etcd to the snapshot it took first), losing what was
// written since.
const (
	VerbStart   Verb = "start"
	VerbApprove Verb = "approve"
	VerbRestore Verb = "restore"
	VerbRead    Verb = "read"
)

// Subject is who sent a request.
type Subject struct {
	Source    string `json:"source"` // "slack" or "webhook"
	UserID    string `json:"userId,omitempty"`
	UserName  string `json:"userName,omitempty"`
	ChannelID string `json:"channelId,omitempty"`
	Key       string `json:"key,omitempty"` // webhook key name
}

// Sources of requests.
const (
	SourceSlack   = "slack"
	SourceWebhook = "webhook"
)

// String names the subject as it is recorded as an approver:
// "slack:alice (U024BE7LH)" or "webhook:ci".
func (s Subject) String() string {
	if s.Source == SourceWebhook {
		return "webhook:" + s.Key
	}
	if s.UserName != "" {
		return fmt.Sprintf("slack:%s (%s)", s.UserName, s.UserID)
	}
	return "slack:" + s.UserID
}

// applies says whether a rule speaks about this subject.
func (r *Rule) applies(s Subject) bool {
	switch s.Source {
	case SourceSlack:
		if len(r.SlackUsers) == 0 && len(r.SlackChannels) == 0 {
			return false
		}
		if len(r.SlackUsers) > 0 && !slices.Contains(r.SlackUsers, s.UserID) {
			return false
		}
		if len(r.SlackChannels) > 0 && !slices.Contains(r.SlackChannels, s.ChannelID) {
			return false
		}
		return true
	case SourceWebhook:
		return s.Key != "" && slices.Contains(r.WebhookKeys, s.Key)
	}
	return false
}

func matches(list []string, name string) bool {
	return slices.Contains(list, Any) || slices.Contains(list, name)
}

// ByNameOnly are the runbooks "*" does not grant: run-command runs any
// command, as root, on every node it is given.
var ByNameOnly = []string{"run-command"}

// startMatches is matches for the runbooks a rule lets start: those of
// ByNameOnly only when the rule names them.
func startMatches(list []string, runbook string) bool {
	if slices.Contains(ByNameOnly, runbook) {
		return slices.Contains(list, runbook)
	}
	return matches(list, runbook)
}

// Refused is an authorization refusal; its message is shown to the sender.
type Refused struct{ Msg string }

func (e *Refused) Error() string { return e.Msg }

// Authorize returns the rule that lets s do verb with runbook on cluster,
// or a Refused error that says what was asked and that no rule allows it.
func (c *Config) Authorize(s Subject, verb Verb, runbook, cluster string) (*Rule, error) {
	for i := range c.Rules {
		r := &c.Rules[i]
		if !r.applies(s) || !matches(r.Clusters, cluster) {
			continue
		}
		switch verb {
		case VerbRead:
			return r, nil
		case VerbStart:
			if startMatches(r.Start, runbook) {
				return r, nil
			}
		case VerbApprove:
			if matches(r.Approve, runbook) {
				return r, nil
			}
		case VerbRestore:
			if matches(r.Restore, runbook) {
				return r, nil
			}
		}
	}
	what := fmt.Sprintf("%s %s on %s", verb, runbook, cluster)
	if verb == VerbRead {
		what = "see runs on " + cluster
	}
	return nil, &Refused{Msg: fmt.Sprintf("not allowed: %s may not %s (no rule in the ChatOps config allows it; ask an admin)", s, what)}
}

// readableClusters lists the clusters s may see runs of, sorted.
func (c *Config) readableClusters(s Subject) []string {
	var out []string
	for name := range c.Clusters {
		if _, err := c.Authorize(s, VerbRead, "", name); err == nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
