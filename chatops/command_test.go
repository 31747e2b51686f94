package chatops

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"
)

func TestParseCommand(t *testing.T) {
	for _, tc := range []struct {
		text string
		want string // fmt of the command, or "error: substring"
	}{
		{"", "help"},
		{"  help ", "help"},
		{"swap-kubelet mercury image=quay.io/poseidon/kubelet:v1.35.4 max-unavailable=2",
			"swap-kubelet kubelet-image-swap@mercury map[image:quay.io/poseidon/kubelet:v1.35.4 maxUnavailable:2]"},
		{"SWAP-KUBELET mercury image=quay.io/poseidon/kubelet:v1.35.4 nodes=worker-1,worker-2",
			"swap-kubelet kubelet-image-swap@mercury map[image:quay.io/poseidon/kubelet:v1.35.4 nodes:worker-1,worker-2]"},
		// Slack links image references it thinks are URLs.
		{"swap-kubelet mercury image=<http://quay.io/poseidon/kubelet:v1.35.4|quay.io/poseidon/kubelet:v1.35.4>",
			"swap-kubelet kubelet-image-swap@mercury map[image:quay.io/poseidon/kubelet:v1.35.4]"},
		{"run run-command mercury command=“uptime -p” nodes=workers",
			"run run-command@mercury map[command:uptime -p nodes:workers]"},
		{`run run-command mercury command="echo it's fine"`, "run run-command@mercury map[command:echo it's fine]"},
		{"run deploy mercury message=a&amp;b", "run deploy@mercury map[message:a&b]"},
		{"status kubelet-image-swap/mercury", "status id=kubelet-image-swap/mercury"},
		{"approve kubelet-image-swap/mercury", "approve id=kubelet-image-swap/mercury"},
		{"abort kubelet-image-swap/mercury/workers", "abort id=kubelet-image-swap/mercury/workers"},
		{"restore cluster-upgrade/mercury/20261204", "restore id=cluster-upgrade/mercury/20261204"},
		{"restore a b", "error: restore takes one workflow ID: /kedge restore ID"},
		{"upgrade lab v1.36.3 destination=offsite approve-first=false",
			"upgrade cluster-upgrade@lab map[approveFirst:false destination:offsite version:v1.36.3]"},
		{"upgrade lab", "error: upgrade needs a CLUSTER and a VERSION"},
		{"os-update lab max-unavailable=2 window-schedule='0 2 * * SAT' delay=5m",
			"os-update os-update@lab map[delay:5m maxUnavailable:2 windowSchedule:0 2 * * SAT]"},
		{"os-update lab", "os-update os-update@lab map[]"},
		{"os-update", "error: os-update needs a CLUSTER first"},
		{"os-update max-unavailable=2", "error: os-update needs a CLUSTER first"},
		{"os-update ../lab", `error: "../lab" is not a cluster name`},
		{"upgrade lab v1.36.3 destination=offsite approve-plan=false", "error: approvePlan cannot be set from chat"},
		{"run cluster-upgrade lab version=v1.36.3 destination=offsite approvePlan=false", "error: approvePlan cannot be set from chat"},
		{"run etcd-upgrade lab version=3.6.16 destination=offsite approve-plan=false", "error: approvePlan cannot be set from chat"},
		{"run etcd-upgrade lab version=3.6.16 destination=offsite", "run etcd-upgrade@lab map[destination:offsite version:3.6.16]"},
		{"run cluster-upgrade lab version=v1.36.3 destination=offsite", "run cluster-upgrade@lab map[destination:offsite version:v1.36.3]"},
		{"upgrade lab version=v1.36.3", "error: upgrade needs a CLUSTER and a VERSION"},
		{"upgrade lab 1.36.3", `error: "1.36.3" is not a Kubernetes release`},
		{"upgrade lab v1.36.3;reboot", `error: "v1.36.3;reboot" is not a Kubernetes release`},
		{"upgrade lab v1.36.3 version=v1.37.0", "error: upgrade takes its VERSION after the CLUSTER"},
		{"upgrade ../lab v1.36.3", `error: "../lab" is not a cluster name`},
		{"list", "list @"},
		{"list mercury", "list @mercury"},

		{"frobnicate mercury", `error: unknown command "frobnicate"`},
		{"swap-kubelet", "error: swap-kubelet needs a CLUSTER first"},
		{"swap-kubelet image=x", "error: swap-kubelet needs a CLUSTER first"},
		{"swap-kubelet mercury max-unavailable=2", "error: swap-kubelet needs image=REF"},
		{"swap-kubelet Mercury image=a:b", `error: "Mercury" is not a cluster name`},
		{"swap-kubelet mercury image=a:b image=c:d", "error: param image is given twice"},
		{"swap-kubelet mercury image=a:b max-unavailable=1 maxUnavailable=2", "error: param maxUnavailable is given twice"},
		{"swap-kubelet mercury image=a:b stray", `error: unexpected "stray": params are NAME=VALUE`},
		{"swap-kubelet mercury image=", "error: param image has no value"},
		{"swap-kubelet mercury =x image=a:b", `error: "" is not a param name`},
		{"swap-kubelet mercury 9x=1 image=a:b", `error: "9x" is not a param name`},
		{`run deploy mercury message="unclosed`, "error: a quote (\") is not closed"},
		{"run deploy", "error: run needs a RUNBOOK and a CLUSTER"},
		{"run ../etc mercury", `error: "../etc" is not a runbook name`},
		{"status", "error: status takes one workflow ID"},
		{"status a b", "error: status takes one workflow ID"},
		{"list a b", "error: list takes at most one CLUSTER"},
		{"run deploy mercury x=\x01", "error: control character"},
		{"status " + strings.Repeat("a", 500), "error: the workflow ID is 500 bytes long"},
		{strings.Repeat("a ", 2000), "error: the command is 4000 bytes long"},
		{strings.Repeat("a ", 100), "error: too many arguments"},
		{"list \xff", "error: not valid UTF-8"},
	} {
		t.Run(tc.text[:min(len(tc.text), 40)], func(t *testing.T) {
			c, err := ParseCommand(tc.text)
			if strings.HasPrefix(tc.want, "error: ") {
				var ue *UsageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), strings.TrimPrefix(tc.want, "error: ")) {
					t.Fatalf("ParseCommand(%q) = %+v, %v; want a UsageError with %q", tc.text, c, err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseCommand(%q): %v", tc.text, err)
			}
			if got := show(c); got != tc.want {
				t.Errorf("ParseCommand(%q) = %s, want %s", tc.text, got, tc.want)
			}
		})
	}
}

func show(c Command) string {
	switch c.Name {
	case CmdSwapKubelet, CmdUpgrade, CmdOSUpdate, CmdRun:
		return fmt.Sprintf("%s %s@%s %v", c.Name, c.Runbook, c.Cluster, c.Params)
	case CmdStatus, CmdApprove, CmdAbort, CmdRestore:
		return c.Name + " id=" + c.ID
	case CmdList:
		return "list @" + c.Cluster
	}
	return c.Name
}

func TestParamsKeepTheirOrder(t *testing.T) {
	c, err := ParseCommand("run deploy mercury b=1 a-b=2 c=3")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Order, ","); got != "b,aB,c" {
		t.Errorf("order = %s", got)
	}
}

// FuzzParseCommand: any text either parses into a command whose parts are
// well formed, or is a UsageError; it never panics.
func FuzzParseCommand(f *testing.F) {
	for _, seed := range []string{
		"",
		"help",
		"swap-kubelet mercury image=quay.io/poseidon/kubelet:v1.35.4 max-unavailable=2",
		"swap-kubelet mercury image=<http://quay.io/x:1|quay.io/x:1> nodes=worker-1,worker-2",
		`run run-command mercury command="uptime -p" nodes=workers`,
		"run deploy mercury message=“hi there” k='v w'",
		"status kubelet-image-swap/mercury",
		"approve a/b/c", "abort x", "list", "list mercury",
		"run a b c=", "run a b =c", `run a b c="`, "<<<>>>", "&amp;&lt;&gt;", "<http://a|", "\x00", "s\u00a0t",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		c, err := ParseCommand(text)
		if err != nil {
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("ParseCommand(%q) returned %T, not a UsageError: %v", text, err, err)
			}
			if ue.Msg == "" {
				t.Fatalf("ParseCommand(%q): empty message", text)
			}
			return
		}
		switch c.Name {
		case CmdHelp:
		case CmdSwapKubelet, CmdRun:
			if !runbookNameRE.MatchString(c.Runbook) || !clusterNameRE.MatchString(c.Cluster) {
				t.Fatalf("ParseCommand(%q) = %+v: bad runbook or cluster", text, c)
			}
			if len(c.Order) != len(c.Params) {
				t.Fatalf("ParseCommand(%q) = %+v: order and params differ", text, c)
			}
			for k, v := range c.Params {
				if strings.Contains(k, "-") || k == "" || v == "" || len(v) > maxValueLen {
					t.Fatalf("ParseCommand(%q): param %q=%q", text, k, v)
				}
			}
			if c.Name == CmdSwapKubelet && c.Params["image"] == "" {
				t.Fatalf("ParseCommand(%q): swap without image", text)
			}
		case CmdStatus, CmdApprove, CmdAbort, CmdRestore:
			if c.ID == "" || len(c.ID) > maxIDLen || strings.IndexFunc(c.ID, unicode.IsSpace) >= 0 {
				t.Fatalf("ParseCommand(%q): ID %q", text, c.ID)
			}
		case CmdList:
			if c.Cluster != "" && !clusterNameRE.MatchString(c.Cluster) {
				t.Fatalf("ParseCommand(%q): cluster %q", text, c.Cluster)
			}
		default:
			t.Fatalf("ParseCommand(%q) = unknown command %q", text, c.Name)
		}
	})
}
