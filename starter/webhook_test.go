package starter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWebhookRefusesToStartWithoutAGoodConfig(t *testing.T) {
	t.Setenv(envWebhookConfig, "")
	if _, errOut, code := runCLI(t, "webhook"); code != ExitUsage || !strings.Contains(errOut, "webhook needs --config FILE") {
		t.Errorf("no config: exit %d: %s", code, errOut)
	}
	bad := filepath.Join(t.TempDir(), "chatops.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: kedge/v1\nkind: ChatOps\nallow: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, "webhook", "--config", bad)
	if code != ExitFailed || !strings.Contains(errOut, bad+":3:8: allow must be a list of rules, got a mapping") {
		t.Errorf("bad config: exit %d: %s", code, errOut)
	}
}

func TestDevSigningSecretIsMadeOnceAndNeverPrinted(t *testing.T) {
	t.Setenv(envSigningSecret, "")
	dir := t.TempDir()
	var out strings.Builder
	s1, err := devSigningSecret("", dir, &out)
	if err != nil || len(s1) != 64 {
		t.Fatalf("secret %d bytes, %v", len(s1), err)
	}
	s2, _ := devSigningSecret("", dir, &out)
	if s1 != s2 || strings.Count(out.String(), "new Slack signing secret in "+filepath.Join(dir, "slack-signing-secret")) != 1 || strings.Contains(out.String(), s1) {
		t.Errorf("second call: %q; printed %q", s2, out.String())
	}
	t.Setenv(envSigningSecret, "from-the-environment")
	if s, _ := devSigningSecret("", dir, &out); s != "from-the-environment" {
		t.Errorf("the environment's secret is not used: %q", s)
	}
}
