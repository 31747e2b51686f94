package chatops

import (
	"os"
	"testing"
)

// TestMain gives the test secrets the mode a secret file must have: git
// checks files out 0644, which the config loader refuses (open.key stays
// so, to show that).
func TestMain(m *testing.M) {
	for _, f := range []string{"testdata/ci.key", "testdata/short.key"} {
		if err := os.Chmod(f, 0o600); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
