package sshhost

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
)

// A key holder names a host file by a path that climbs with "..": every
// host file action refuses it as invalid input, naming the path, before
// any SSH connection (the host's sshd sees none). Before, host.read-file
// read through it, and host.restore-file copied any file the path
// reached over the one it restored.
func TestNoHostFileActionClimbsWithDotDot(t *testing.T) {
	w := newWorld(t)
	dir := w.srv.Dir
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("the host's own secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(dir, "etc/kubernetes"), w.acts.BackupDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	up := dir + "/etc/kubernetes/../../secret"
	restored := filepath.Join(dir, "restored")
	for name, call := range map[string]func() (any, error){
		"read-file": func() (any, error) {
			return w.acts.ReadFile(t.Context(), host.ReadFileInput{Target: w.tg, Path: up})
		},
		"read-file of /..": func() (any, error) {
			return w.acts.ReadFile(t.Context(), host.ReadFileInput{Target: w.tg, Path: "/.."})
		},
		"write-file": func() (any, error) {
			return w.acts.WriteFile(t.Context(), host.WriteFileInput{Target: w.tg, Path: dir + "/x/../y", Content: "a"})
		},
		"restore-file's path": func() (any, error) {
			return w.acts.RestoreFile(t.Context(), host.RestoreFileInput{Target: w.tg, Path: dir + "/x/../y"})
		},
		"restore-file's backup": func() (any, error) {
			return w.acts.RestoreFile(t.Context(), host.RestoreFileInput{Target: w.tg, Path: restored, Backup: w.acts.BackupDir + "/../secret", Existed: true})
		},
		"install-bundle": func() (any, error) {
			return w.acts.InstallBundle(t.Context(), host.InstallBundleInput{Target: w.tg, Files: []host.BundleFile{{Path: dir + "/a/../b", Content: "x"}}})
		},
		"restore-bundle's files": func() (any, error) {
			return w.acts.RestoreBundle(t.Context(), host.RestoreBundleInput{Target: w.tg, Created: []string{dir + "/a/../b"}})
		},
		"restore-bundle's backup": func() (any, error) {
			return w.acts.RestoreBundle(t.Context(), host.RestoreBundleInput{Target: w.tg, Files: []string{restored}, Backup: w.acts.BackupDir + "/bundle-0/../.."})
		},
		"cert-info": func() (any, error) {
			return w.acts.CertInfo(t.Context(), host.CertInfoInput{Target: w.tg, Paths: []string{up}})
		},
		"restart-static-pod": func() (any, error) {
			return w.acts.RestartStaticPod(t.Context(), host.RestartStaticPodInput{Target: w.tg, Manifest: dir + "/manifests/../pod.yaml"})
		},
	} {
		res, err := call()
		if err == nil {
			t.Errorf("%s: a path with \"..\" was followed: %+v", name, res)
			continue
		}
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || !errtype.Is(err, errtype.InvalidInput) || !app.NonRetryable() || !strings.Contains(err.Error(), `".."`) {
			t.Errorf("%s: want an InvalidInput that is not retried and names \"..\", got %v", name, err)
		}
	}
	if n := w.srv.Accepted(); n != 0 {
		t.Errorf("the host's sshd was dialled %d times for refused paths", n)
	}
	if _, err := os.Stat(restored); err == nil {
		t.Error("restore-file copied the file a \"..\" backup reached")
	}
}
