package sshpool

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkg/sftp"

	"kedge.dev/kedge/integration/sshtest"

	"kedge.dev/kedge/actions/target"
)

// fakeSudo puts a sudo first on PATH that logs its arguments to log and,
// while deny exists, refuses as sudo -n does when it wants a password.
func fakeSudo(t *testing.T) (log, deny string) {
	t.Helper()
	dir := t.TempDir()
	log, deny = filepath.Join(dir, "sudo.log"), filepath.Join(dir, "deny")
	script := `#!/bin/sh
echo "$*" >> '` + log + `'
[ "$1" = -n ] || { echo "fake sudo: called without -n" >&2; exit 2; }
shift
[ "$1" = -- ] && shift
[ -e '` + deny + `' ] && { echo "sudo: a password is required" >&2; exit 1; }
[ "$1 $2" = "id -u" ] && { echo 0; exit 0; }
exec "$@"
`
	if err := os.WriteFile(filepath.Join(dir, "sudo"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return log, deny
}

func TestBecomeSudoRunsSFTPServerThroughSudo(t *testing.T) {
	if _, err := os.Stat("/usr/lib/openssh/sftp-server"); err != nil {
		t.Skip("no /usr/lib/openssh/sftp-server on this machine (make deps installs it)")
	}
	log, _ := fakeSudo(t)
	s := sshtest.Start(t, sshtest.Config{NoSFTP: true})
	p := New(Options{})
	defer p.Close()
	tg := sshTarget(s)
	tg.Become = target.BecomeSudo
	ctx := context.Background()
	if err := p.CheckBecome(ctx, tg); err != nil {
		t.Fatalf("CheckBecome: %v", err)
	}
	// The server refuses the sftp subsystem: only sftp-server through
	// sudo can serve this.
	path := filepath.Join(t.TempDir(), "written")
	err := p.WithSFTP(ctx, tg, func(c *sftp.Client) error {
		f, err := c.Create(path)
		if err != nil {
			return err
		}
		if _, err := f.Write([]byte("as root")); err != nil {
			return err
		}
		return f.Close()
	})
	if err != nil {
		t.Fatalf("WithSFTP: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "as root" {
		t.Errorf("file = %q", got)
	}
	calls, _ := os.ReadFile(log)
	if !strings.Contains(string(calls), "-n -- id -u") || !strings.Contains(string(calls), "sftp-server") {
		t.Errorf("sudo calls:\n%s\nwant the check and sftp-server", calls)
	}
	if got := Privileged(tg, "sh -s"); got != "sudo -n -- sh -s" {
		t.Errorf("Privileged = %q", got)
	}
	tg.Become = ""
	if got := Privileged(tg, "sh -s"); got != "sh -s" {
		t.Errorf("Privileged without become = %q", got)
	}
}

func TestBecomeRefusedIsNotRetryableAndNamesHostAndUser(t *testing.T) {
	_, deny := fakeSudo(t)
	if err := os.WriteFile(deny, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := sshtest.Start(t, sshtest.Config{})
	p := New(Options{})
	defer p.Close()
	tg := sshTarget(s)
	tg.User, tg.Become = "core", target.BecomeSudo
	_, err := run(context.Background(), p, tg, "true")
	if !errors.Is(err, ErrPrivilege) || Retryable(err) {
		t.Fatalf("err = %v; want ErrPrivilege, not retryable", err)
	}
	for _, want := range []string{"worker-1", "user core", "sudo: a password is required", "NOPASSWD"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	// Once sudo is fixed, a fresh check lets work through.
	if err := os.Remove(deny); err != nil {
		t.Fatal(err)
	}
	if err := p.CheckBecome(context.Background(), tg); err != nil {
		t.Fatalf("CheckBecome after the fix: %v", err)
	}
	if out, err := run(context.Background(), p, tg, "echo ok"); err != nil || strings.TrimSpace(out) != "ok" {
		t.Errorf("run after the fix: %q %v", out, err)
	}
	if perr := AsPrivilegeError(tg, "some output\nsudo: a password is required\n"); !errors.Is(perr, ErrPrivilege) {
		t.Errorf("AsPrivilegeError = %v", perr)
	}
	if perr := AsPrivilegeError(tg, "ls: cannot access"); perr != nil {
		t.Errorf("AsPrivilegeError on other output = %v", perr)
	}
}
