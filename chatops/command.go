package chatops

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"kedge.dev/kedge/slackmsg"
)

// Commands of `/kedge`.
const (
	CmdSwapKubelet = "swap-kubelet"
	CmdUpgrade     = "upgrade"
	CmdOSUpdate    = "os-update"
	CmdRun         = "run"
	CmdStatus      = "status"
	CmdApprove     = "approve"
	CmdAbort       = "abort"
	CmdRestore     = "restore"
	CmdList        = "list"
	CmdHelp        = "help"
)

// SwapRunbook is the runbook `/kedge swap-kubelet` starts.
const SwapRunbook = "kubelet-image-swap"

// UpgradeRunbook is the runbook `/kedge upgrade` starts.
const UpgradeRunbook = "cluster-upgrade"

// OSUpdateRunbook is the runbook `/kedge os-update` starts.
const OSUpdateRunbook = "os-update"

// Limits of a command's text.
const (
	maxCommandLen = 3000
	maxTokens     = 64
	maxIDLen      = 400
	maxValueLen   = 1000
)

// Usage is the help text of `/kedge`.
const Usage = "usage:\n" +
	"  /kedge swap-kubelet CLUSTER image=REF [max-unavailable=N] [nodes=a,b|workers] [failure-budget=N]\n" +
	"  /kedge upgrade CLUSTER VERSION destination=BACKUPS [max-unavailable=N] [approve-first=false]\n" +
	"  /kedge os-update CLUSTER [max-unavailable=N] [nodes=a,b|workers] [window-schedule='0 2 * * SAT'] [delay=5m]\n" +
	"  /kedge run RUNBOOK CLUSTER [name=value ...]\n" +
	"  /kedge status ID\n" +
	"  /kedge approve ID      (continue a paused rollout, or approve a waiting step)\n" +
	"  /kedge abort ID        (abort a paused rollout, or reject a waiting step)\n" +
	"  /kedge restore ID      (abort a paused rollout, then restore: its runbook's restore steps)\n" +
	"  /kedge list [CLUSTER]"

// Command is a parsed `/kedge` command.
type Command struct {
	Name    string // one of the Cmd constants
	Runbook string // swap-kubelet, upgrade, run
	Cluster string // swap-kubelet, upgrade, run, list (optional)
	ID      string // status, approve, abort, restore
	// Params are the NAME=VALUE arguments, names in camelCase
	// (max-unavailable becomes maxUnavailable), in the order given.
	Params map[string]string
	Order  []string
}

// UsageError is a command that cannot be parsed; its message is shown to
// the sender.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

var (
	clusterNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	runbookNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)
	paramKeyRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)
	releaseRE     = regexp.MustCompile(`^v(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})$`)
)

// planShown refuses an upgrade from chat that would skip its plan: in
// chat the plan is always posted, and the upgrade starts on its button
// (which a person allowed to approve clicks), never at the command.
func planShown(c Command) error {
	if _, ok := c.Params[UpgradePlanParam]; ok && (c.Runbook == UpgradeRunbook || c.Runbook == EtcdUpgradeRunbook) {
		return usagef("%s cannot be set from chat: the plan is posted first and the upgrade starts on its Continue button", UpgradePlanParam)
	}
	return nil
}

// EtcdUpgradeRunbook is etcd's upgrade: like cluster-upgrade, its plan
// is always shown in chat.
const EtcdUpgradeRunbook = "etcd-upgrade"

// UpgradePlanParam is cluster-upgrade's and etcd-upgrade's param that
// asks before anything changes.
const UpgradePlanParam = "approvePlan"

// ParseCommand parses the text of a `/kedge` slash command (what follows
// the command itself). It never panics; anything it cannot read is a
// UsageError that says what is wrong.
func ParseCommand(text string) (Command, error) {
	if len(text) > maxCommandLen {
		return Command{}, usagef("the command is %d bytes long; at most %d", len(text), maxCommandLen)
	}
	if !utf8.ValidString(text) {
		return Command{}, usagef("the command is not valid UTF-8")
	}
	toks, err := tokenize(unescapeSlack(text))
	if err != nil {
		return Command{}, err
	}
	if len(toks) == 0 {
		return Command{Name: CmdHelp}, nil
	}
	if len(toks) > maxTokens {
		return Command{}, usagef("too many arguments (%d; at most %d)", len(toks), maxTokens)
	}
	name, args := strings.ToLower(toks[0]), toks[1:]
	c := Command{Name: name}
	switch name {
	case CmdHelp:
		return c, nil
	case CmdSwapKubelet:
		if len(args) == 0 || strings.Contains(args[0], "=") {
			return Command{}, usagef("swap-kubelet needs a CLUSTER first: /kedge swap-kubelet CLUSTER image=REF [max-unavailable=N]")
		}
		c.Runbook = SwapRunbook
		if c.Cluster, err = clusterArg(args[0]); err != nil {
			return Command{}, err
		}
		if err := c.parseParams(args[1:]); err != nil {
			return Command{}, err
		}
		if _, ok := c.Params["image"]; !ok {
			return Command{}, usagef("swap-kubelet needs image=REF, e.g. image=quay.io/poseidon/kubelet:v1.35.4")
		}
		return c, nil
	case CmdOSUpdate:
		if len(args) == 0 || strings.Contains(args[0], "=") {
			return Command{}, usagef("os-update needs a CLUSTER first: /kedge os-update CLUSTER [max-unavailable=N]")
		}
		c.Runbook = OSUpdateRunbook
		if c.Cluster, err = clusterArg(args[0]); err != nil {
			return Command{}, err
		}
		return c, c.parseParams(args[1:])
	case CmdUpgrade:
		if len(args) < 2 || strings.Contains(args[0], "=") || strings.Contains(args[1], "=") {
			return Command{}, usagef("upgrade needs a CLUSTER and a VERSION: /kedge upgrade CLUSTER v1.36.3 destination=BACKUPS")
		}
		c.Runbook = UpgradeRunbook
		if c.Cluster, err = clusterArg(args[0]); err != nil {
			return Command{}, err
		}
		if !releaseRE.MatchString(args[1]) {
			return Command{}, usagef("%q is not a Kubernetes release (vMAJOR.MINOR.PATCH, e.g. v1.36.3)", slackmsg.Clip(args[1]))
		}
		if err := c.parseParams(args[2:]); err != nil {
			return Command{}, err
		}
		if _, ok := c.Params["version"]; ok {
			return Command{}, usagef("upgrade takes its VERSION after the CLUSTER, not as version=")
		}
		c.Params["version"] = args[1]
		c.Order = append([]string{"version"}, c.Order...)
		return c, planShown(c)
	case CmdRun:
		if len(args) < 2 || strings.Contains(args[0], "=") || strings.Contains(args[1], "=") {
			return Command{}, usagef("run needs a RUNBOOK and a CLUSTER: /kedge run RUNBOOK CLUSTER [name=value ...]")
		}
		if !runbookNameRE.MatchString(args[0]) {
			return Command{}, usagef("%q is not a runbook name (lowercase letters, digits, '-', '_', '.')", slackmsg.Clip(args[0]))
		}
		c.Runbook = args[0]
		if c.Cluster, err = clusterArg(args[1]); err != nil {
			return Command{}, err
		}
		if err := c.parseParams(args[2:]); err != nil {
			return Command{}, err
		}
		return c, planShown(c)
	case CmdStatus, CmdApprove, CmdAbort, CmdRestore:
		if len(args) != 1 {
			return Command{}, usagef("%s takes one workflow ID: /kedge %s ID", name, name)
		}
		id := args[0]
		if len(id) > maxIDLen {
			return Command{}, usagef("the workflow ID is %d bytes long; at most %d", len(id), maxIDLen)
		}
		for _, r := range id {
			if !unicode.IsPrint(r) || unicode.IsSpace(r) {
				return Command{}, usagef("the workflow ID holds a character that cannot be in one (%U)", r)
			}
		}
		c.ID = id
		return c, nil
	case CmdList:
		switch len(args) {
		case 0:
		case 1:
			if c.Cluster, err = clusterArg(args[0]); err != nil {
				return Command{}, err
			}
		default:
			return Command{}, usagef("list takes at most one CLUSTER: /kedge list [CLUSTER]")
		}
		return c, nil
	}
	return Command{}, usagef("unknown command %q\n%s", slackmsg.Clip(toks[0]), Usage)
}

func clusterArg(s string) (string, error) {
	if !clusterNameRE.MatchString(s) {
		return "", usagef("%q is not a cluster name (lowercase letters, digits and '-')", slackmsg.Clip(s))
	}
	return s, nil
}

func (c *Command) parseParams(args []string) error {
	c.Params = map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return usagef("unexpected %q: params are NAME=VALUE", slackmsg.Clip(a))
		}
		if !paramKeyRE.MatchString(k) {
			return usagef("%q is not a param name", slackmsg.Clip(k))
		}
		if v == "" {
			return usagef("param %s has no value (NAME=VALUE)", k)
		}
		if len(v) > maxValueLen {
			return usagef("the value of %s is %d bytes long; at most %d", k, len(v), maxValueLen)
		}
		name := camel(k)
		if _, dup := c.Params[name]; dup {
			return usagef("param %s is given twice", name)
		}
		c.Params[name] = v
		c.Order = append(c.Order, name)
	}
	return nil
}

// camel turns max-unavailable into maxUnavailable. Runbook param names
// never hold '-', so the mapping is unambiguous.
func camel(k string) string {
	if !strings.Contains(k, "-") {
		return k
	}
	parts := strings.Split(k, "-")
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1:] {
		if p == "" {
			continue
		}
		b.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	return b.String()
}

// unescapeSlack undoes what Slack does to a command's text: links become
// <http://x|x> (their label is kept), and &, <, > arrive as entities.
func unescapeSlack(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], '>')
		if j < 0 {
			break
		}
		b.WriteString(s[:i])
		inner := s[i+1 : i+j]
		if strings.HasPrefix(inner, "http://") || strings.HasPrefix(inner, "https://") || strings.HasPrefix(inner, "mailto:") {
			if _, label, ok := strings.Cut(inner, "|"); ok {
				inner = label
			}
			b.WriteString(inner)
		} else {
			b.WriteString(s[i : i+j+1])
		}
		s = s[i+j+1:]
	}
	b.WriteString(s)
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(b.String())
}

// tokenize splits on white space; "double" or 'single' quotes (straight or
// curly, as Slack's clients type them) at the start of a word or right
// after '=' keep spaces in a value (name="a b").
func tokenize(s string) ([]string, error) {
	var toks []string
	var cur strings.Builder
	inTok := false
	var quote, prev rune
	for _, r := range s {
		last := prev
		prev = r
		switch {
		case quote != 0:
			if closes(quote, r) {
				quote = 0
				continue
			}
			cur.WriteRune(r)
		case opens(r) != 0 && (!inTok || last == '='):
			quote = opens(r)
			inTok = true
		case unicode.IsSpace(r):
			if inTok {
				toks = append(toks, cur.String())
				cur.Reset()
				inTok = false
			}
		case unicode.IsControl(r):
			return nil, usagef("the command holds a control character (%U)", r)
		default:
			cur.WriteRune(r)
			inTok = true
		}
	}
	if quote != 0 {
		return nil, usagef("a quote (%c) is not closed", quote)
	}
	if inTok {
		toks = append(toks, cur.String())
	}
	return toks, nil
}

// opens returns the quote r opens, or 0.
func opens(r rune) rune {
	switch r {
	case '"', '“', '”':
		return '"'
	case '\'', '‘':
		return '\''
	}
	return 0
}

func closes(q, r rune) bool {
	if q == '"' {
		return r == '"' || r == '”' || r == '“'
	}
	return r == '\'' || r == '’' || r == '‘'
}
