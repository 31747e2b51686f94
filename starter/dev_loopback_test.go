package starter

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kedge dev's Temporal and Web UI authenticate nobody: an address other
// than loopback is refused before anything starts.
func TestDevServesLoopbackOnly(t *testing.T) {
	for _, o := range []DevOptions{{Address: "0.0.0.0:7233"}, {Address: "127.0.0.1:0", UIAddress: "10.1.2.3:8233"}, {Address: ":7233"}} {
		o.DataDir = filepath.Join(t.TempDir(), "dev")
		var out bytes.Buffer
		err := RunDev(t.Context(), o, &out)
		if err == nil || !strings.Contains(err.Error(), "only on a loopback address") {
			t.Errorf("%+v: %v", o, err)
		}
		if _, statErr := os.Stat(o.DataDir); statErr == nil {
			t.Errorf("%+v: the data directory was made", o)
		}
	}
}
