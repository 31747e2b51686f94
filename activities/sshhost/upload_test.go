package sshhost

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"kedge.dev/kedge/actions/host"
)

// TestAnUploadResumesFromWhatTheHostHas installs a bundle in an attempt
// that follows a lost one which heartbeated half of it written: the
// upload goes on from there only when the host's bytes hash the same.
func TestAnUploadResumesFromWhatTheHostHas(t *testing.T) {
	defer func(n int) { uploadChunk = n }(uploadChunk)
	uploadChunk = 1 << 10
	var mu sync.Mutex
	var writes [][2]int64
	uploadWrote = func(off, end int64) {
		mu.Lock()
		writes = append(writes, [2]int64{off, end})
		mu.Unlock()
	}
	defer func() { uploadWrote = nil }()
	for _, tc := range []struct {
		name   string
		prefix func(archive []byte, half int) []byte // the part file a lost attempt left
		from   int64                                 // where the upload must go on from
	}{
		{name: "the same bytes", prefix: func(a []byte, half int) []byte { return a[:half] }, from: -1},
		{name: "other bytes", prefix: func(a []byte, half int) []byte { return []byte(strings.Repeat("x", half)) }},
		{name: "fewer bytes", prefix: func(a []byte, half int) []byte { return a[:half-1] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			target := filepath.Join(t.TempDir(), "etc/kedge/big")
			content := strings.Repeat("0123456789abcdef", 1<<9) // 8 KiB: 8+ chunks
			files := []host.BundleFile{{Path: target, Content: content}}
			archive, _, err := buildBundle(files)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha(archive)
			bundle := path.Join(w.acts.backupDir(), "bundle-"+sum[:16]) + ".tar"
			half := len(archive) / 2
			if err := os.MkdirAll(filepath.Dir(bundle), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bundle+".part", tc.prefix(archive, half), 0o600); err != nil {
				t.Fatal(err)
			}
			var s testsuite.WorkflowTestSuite
			env := s.NewTestActivityEnvironment()
			env.SetHeartbeatDetails(bundleProgress{Bundle: sum, Uploaded: int64(half)})
			mu.Lock()
			writes = nil
			mu.Unlock()
			env.RegisterActivityWithOptions(w.acts.InstallBundle, activity.RegisterOptions{Name: host.InstallBundleAction})
			if _, err := env.ExecuteActivity(host.InstallBundleAction, host.InstallBundleInput{Target: w.tg, Files: files}); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(target); string(got) != content {
				t.Fatalf("the installed file (%d bytes) is not the bundle's (%d bytes)", len(got), len(content))
			}
			mu.Lock()
			defer mu.Unlock()
			want := int64(0)
			if tc.from < 0 {
				want = int64(half)
			}
			if len(writes) == 0 || writes[0][0] != want || writes[len(writes)-1][1] != int64(len(archive)) {
				t.Errorf("the upload wrote %v, want it to go on from %d to %d", writes, want, len(archive))
			}
		})
	}
}
