package secretfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadRefusesWhatOthersMayRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	for _, c := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o640, false}, {0o604, false}, {0o622, false}} {
		if err := os.WriteFile(p, []byte("s3cret"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, c.mode); err != nil {
			t.Fatal(err)
		}
		data, err := Read(p)
		var me *ModeError
		switch {
		case c.ok && (err != nil || string(data) != "s3cret"):
			t.Errorf("mode %04o: %q %v", c.mode, data, err)
		case !c.ok && !errors.As(err, &me):
			t.Errorf("mode %04o: %v, want a ModeError", c.mode, err)
		}
		_ = os.Chmod(p, 0o600)
	}
	if _, err := Read(dir); err == nil {
		t.Error("a directory was read")
	}
}

// A 0600 secret owned by another account is that account's to replace:
// whoever is `nobody` could swap the worker's key for their own. It is
// refused, naming the file and its owner.
func TestReadRefusesASecretSomeoneElseOwns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file away takes root")
	}
	p := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(p, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	data, err := Read(p)
	var oe *OwnerError
	if !errors.As(err, &oe) || oe.UID != 65534 {
		t.Fatalf("a 0600 secret owned by uid 65534 was read (%q) or refused for another reason: %v", data, err)
	}
	if msg := err.Error(); !strings.Contains(msg, p) || !strings.Contains(msg, "65534") || !strings.Contains(msg, "chown") {
		t.Errorf("the refusal does not name the file, the owner and the fix: %s", msg)
	}
	// Root's own file, and the running user's, are read.
	if err := os.Chown(p, 0, 0); err != nil {
		t.Fatal(err)
	}
	if data, err := Read(p); err != nil || string(data) != "s3cret" {
		t.Errorf("root's own secret: %q %v", data, err)
	}
}
