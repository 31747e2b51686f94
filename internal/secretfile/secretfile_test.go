package secretfile

import (
	"errors"
	"os"
	"path/filepath"
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
