package chatops

import (
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run go test -update): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func loadGood(t *testing.T) *Config {
	t.Helper()
	t.Setenv("KEDGE_TEST_HOOK_ALERTS", "alerts-secret-0123456789abcdef")
	c, err := LoadConfig("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLoadConfig(t *testing.T) {
	c := loadGood(t)
	abs, _ := filepath.Abs("testdata/mercury.yaml")
	if c.Clusters["mercury"] != abs || len(c.Rules) != 4 || c.Rules[1].Name != "ops-channel" || len(c.Rules[3].Restore) != 1 {
		t.Errorf("config = %+v", c)
	}
	if fl := c.FleetLock["mercury"]; fl.Slots != 2 || fl.LostAfter != 45*time.Minute || fl.DrainTimeout != 10*time.Minute || len(fl.Key) == 0 {
		t.Errorf("mercury's fleetLock = %+v", fl)
	}
	if k, ok := c.key("ci"); !ok || string(k) != "a-very-long-ci-secret-0123456789" {
		t.Errorf("ci key not read from its file")
	}
	if k, ok := c.key("alerts"); !ok || string(k) != "alerts-secret-0123456789abcdef" {
		t.Errorf("alerts key not read from its variable")
	}
	if !c.responseURLAllowed("https://hooks.slack.com/commands/T1/2/x") || c.responseURLAllowed("https://evil.example/hooks.slack.com/") {
		t.Error("default responseURLs wrong")
	}
	// Parsed, not compared as strings: a host that merely starts like
	// Slack's, another port, credentials, plain http: all refused.
	for _, u := range []string{"https://hooks.slack.com.evil.example/commands/x", "https://hooks.slack.com:8443/commands/x",
		"https://x@hooks.slack.com/commands/x", "http://hooks.slack.com/commands/x", "https://hooks.slack.com", "hooks.slack.com/commands"} {
		if c.responseURLAllowed(u) {
			t.Errorf("%s allowed", u)
		}
	}
	c.ResponseURLs = []string{"https://hooks.slack.com/commands/"}
	if c.responseURLAllowed("https://hooks.slack.com/commandsx/1") || !c.responseURLAllowed("https://HOOKS.slack.com/commands/1") {
		t.Error("path prefix ends at a segment; the host is case-insensitive")
	}
}

// Every problem of a bad config is reported at once, at its line, and no
// message holds a secret.
func TestLoadConfigErrors(t *testing.T) {
	t.Setenv("X", "whatever-secret-value-123456")
	_, err := LoadConfig("testdata/bad.yaml")
	if err == nil {
		t.Fatal("bad config loaded")
	}
	msg := err.Error()
	for _, secret := range []string{"plain-text-is-refused", "short\n", "whatever-secret-value"} {
		if strings.Contains(msg, secret) {
			t.Errorf("an error shows a secret (%q): %s", secret, msg)
		}
	}
	dir, _ := filepath.Abs("testdata")
	golden(t, "bad", strings.ReplaceAll(msg, dir, "TESTDATA")+"\n")
}

func TestAuthorize(t *testing.T) {
	c := loadGood(t)
	sre := Subject{Source: SourceSlack, UserID: "U0SRE", UserName: "sre", ChannelID: "C0ANY"}
	dev := Subject{Source: SourceSlack, UserID: "U0DEV", ChannelID: "C0OPS"}
	devElsewhere := Subject{Source: SourceSlack, UserID: "U0DEV", ChannelID: "C0RANDOM"}
	ci := Subject{Source: SourceWebhook, Key: "ci"}
	stranger := Subject{Source: SourceSlack, UserID: "U0WHO"}
	lead := Subject{Source: SourceSlack, UserID: "U0LEAD"}
	for _, tc := range []struct {
		sub     Subject
		verb    Verb
		runbook string
		ok      bool
	}{
		{sre, VerbStart, "kubelet-image-swap", true},
		{sre, VerbApprove, "kubelet-image-swap", true},
		{dev, VerbStart, "run-command", true},
		{dev, VerbStart, "kubelet-image-swap", false},
		{dev, VerbApprove, "run-command", false},
		{dev, VerbRead, "", true},
		{devElsewhere, VerbStart, "run-command", false},
		{devElsewhere, VerbRead, "", false},
		{ci, VerbStart, "kubelet-image-swap", true},
		{ci, VerbApprove, "kubelet-image-swap", false},
		{Subject{Source: SourceSlack, Key: "ci"}, VerbStart, "kubelet-image-swap", false},
		{stranger, VerbRead, "", false},
		// Approve, even of every runbook, does not grant restore.
		{sre, VerbRestore, "cluster-upgrade", false},
		{lead, VerbRestore, "cluster-upgrade", true},
		{lead, VerbApprove, "cluster-upgrade", true},
		{lead, VerbRestore, "kubelet-image-swap", false},
		{lead, VerbStart, "cluster-upgrade", false},
		{ci, VerbRestore, "kubelet-image-swap", false},
	} {
		_, err := c.Authorize(tc.sub, tc.verb, tc.runbook, "mercury")
		if (err == nil) != tc.ok {
			t.Errorf("%s %s %s: %v", tc.sub, tc.verb, tc.runbook, err)
		}
		if err != nil && !strings.Contains(err.Error(), "not allowed: "+tc.sub.String()) {
			t.Errorf("refusal does not name who and what: %v", err)
		}
	}
	if got := c.readableClusters(stranger); len(got) != 0 {
		t.Errorf("a stranger reads %v", got)
	}
	if got := c.readableClusters(sre); len(got) != 1 || got[0] != "mercury" {
		t.Errorf("sre reads %v", got)
	}
}

// "*" grants every runbook but run-command, which a rule must name; an
// internal runbook (called by other runbooks only) is never started from
// chat, whatever the rules say.
func TestStartGrantsByNameOnlyAndNeverInternal(t *testing.T) {
	c := loadGood(t)
	sre := Subject{Source: SourceSlack, UserID: "U0SRE"}
	if _, err := c.Authorize(sre, VerbStart, "run-command", "mercury"); err == nil {
		t.Error(`"*" granted run-command`)
	}
	if _, err := c.Authorize(sre, VerbStart, "kubelet-image-swap", "mercury"); err != nil {
		t.Errorf(`"*" did not grant kubelet-image-swap: %v`, err)
	}
	if _, err := c.Authorize(Subject{Source: SourceSlack, UserID: "U0DEV", ChannelID: "C0OPS"}, VerbStart, "run-command", "mercury"); err != nil {
		t.Errorf("a rule naming run-command: %v", err)
	}
	s := &Server{Config: c}
	_, err := s.prepare(&startRequest{Subject: sre, Runbook: "bootstrap-controller", Cluster: "mercury", Params: map[string]any{}})
	var he *httpError
	if !errors.As(err, &he) || he.Status != http.StatusForbidden || !strings.Contains(he.Msg, "bootstrap-controller is called by other runbooks only") {
		t.Errorf("starting an internal runbook: %v", err)
	}
}
