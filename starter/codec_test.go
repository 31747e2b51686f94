package starter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A codec server decodes every payload for whoever reaches it: it does
// not start without a token, nor with one others may read or too short
// to resist guessing. `kedge codec token` makes one it takes, and never
// overwrites a file.
func TestCodecServerNeedsItsToken(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (int, string) {
		var out, errOut strings.Builder
		code := MainContext(t.Context(), append([]string{"kedge"}, args...), IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
		return code, out.String() + errOut.String()
	}
	open := filepath.Join(dir, "open-token")
	short := filepath.Join(dir, "short-token")
	if err := os.WriteFile(open, []byte("0123456789abcdef0123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, []byte("0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{nil, "--token-file is required"},
		{[]string{"--token-file", open}, "chmod 600"},
		{[]string{"--token-file", short}, "at least 16 characters"},
		{[]string{"--token-file", filepath.Join(dir, "missing")}, "missing"},
	} {
		code, out := run(append([]string{"codec-server", "--listen", "127.0.0.1:0"}, c.args...)...)
		if code != ExitUsage || !strings.Contains(out, c.says) {
			t.Errorf("codec-server %v: exit %d: %s (want %q)", c.args, code, out, c.says)
		}
	}
	token := filepath.Join(dir, "codec-token")
	if code, out := run("codec", "token", "--out", token); code != 0 {
		t.Fatalf("codec token: exit %d: %s", code, out)
	}
	if b, err := readToken(token); err != nil || len(b) != 64 {
		t.Errorf("the new token: %d bytes, %v", len(b), err)
	}
	if code, out := run("codec", "token", "--out", token); code == 0 || !strings.Contains(out, "exists") {
		t.Errorf("codec token over an existing file: exit %d: %s", code, out)
	}
}
