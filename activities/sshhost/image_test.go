package sshhost

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
)

// fakeCtr puts a ctr on the test server's PATH whose k8s.io namespace
// holds the lines of a file; a pull of a reference listed in the file
// "pull-ok" adds it, any other fails as with no registry. Every call is
// logged.
func fakeCtr(t *testing.T, have, pullable []string) (store, calls string) {
	bin, dir := t.TempDir(), t.TempDir()
	store, calls = filepath.Join(dir, "store"), filepath.Join(dir, "calls")
	os.WriteFile(store, []byte(strings.Join(have, "\n")+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "pull-ok"), []byte(strings.Join(pullable, "\n")+"\n"), 0o644)
	script := `#!/bin/sh
dir=` + dir + `
echo "$*" >> $dir/calls
[ "$1 $2 $3 $4" = "-a /run/containerd/containerd.sock -n k8s.io" ] || { echo "ctr: unexpected $*" >&2; exit 1; }
shift 4
case "$1 $2" in
"images ls") [ "$3" = -q ] && grep -v '^$' $dir/store; exit 0 ;;
"images pull")
  if grep -qxF "$3" $dir/pull-ok; then echo "$3" >> $dir/store; echo "$3: resolved"; exit 0; fi
  echo "ctr: failed to resolve reference \"$3\": no such host" >&2; exit 1 ;;
esac
echo "ctr: unknown $*" >&2; exit 1
`
	if err := os.WriteFile(filepath.Join(bin, "ctr"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return store, calls
}

func TestPullCRIImagesPullsOnlyWhatIsMissing(t *testing.T) {
	const (
		apiserver = "registry.k8s.io/kube-apiserver:v1.36.3"
		proxy     = "registry.k8s.io/kube-proxy:v1.36.3"
		busybox   = "docker.io/library/busybox:1.37"
	)
	store, calls := fakeCtr(t, []string{apiserver}, []string{proxy, busybox})
	w := newWorld(t)
	root := t.TempDir()
	res, err := w.acts.PullCRIImages(t.Context(), host.PullCRIImagesInput{Target: w.tg, Root: root,
		Images: []string{apiserver, proxy, "busybox:1.37", busybox}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Present, []string{apiserver}) || !slices.Equal(res.Pulled, []string{proxy, busybox}) || res.FreeMiB <= 0 {
		t.Errorf("present %v, pulled %v, free %d MiB", res.Present, res.Pulled, res.FreeMiB)
	}
	if b, _ := os.ReadFile(store); strings.Count(string(b), busybox) != 1 {
		t.Errorf("busybox pulled as often as it was named:\n%s", b)
	}

	// Everything there: nothing pulled, whatever the free space.
	os.Remove(calls)
	res, err = w.acts.PullCRIImages(t.Context(), host.PullCRIImagesInput{Target: w.tg, Root: root, MinFreeMiB: 1 << 40, Images: []string{apiserver, proxy}})
	if err != nil || len(res.Pulled) != 0 || len(res.Present) != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	if b, _ := os.ReadFile(calls); strings.Contains(string(b), "pull") {
		t.Errorf("ctr called to pull what was there:\n%s", b)
	}

	// Something to pull and not the space for it: refused before any pull.
	os.Remove(calls)
	_, err = w.acts.PullCRIImages(t.Context(), host.PullCRIImagesInput{Target: w.tg, Root: root, MinFreeMiB: 1 << 40,
		Images: []string{"registry.k8s.io/kube-scheduler:v1.36.3"}})
	appErr(t, err, "DiskFull", true)
	if !strings.Contains(err.Error(), "before pulling registry.k8s.io/kube-scheduler:v1.36.3") || !strings.Contains(err.Error(), root) {
		t.Errorf("message %q", err)
	}
	if b, _ := os.ReadFile(calls); strings.Contains(string(b), "pull") {
		t.Errorf("ctr pulled on a full disk:\n%s", b)
	}

	// An image no registry serves: the pull's error, retried by the step.
	_, err = w.acts.PullCRIImages(t.Context(), host.PullCRIImagesInput{Target: w.tg, Root: root,
		Images: []string{apiserver, "registry.k8s.io/kube-scheduler:v1.36.3"}})
	appErr(t, err, errtype.CommandFailed, false)
	if !strings.Contains(err.Error(), "pulling registry.k8s.io/kube-scheduler:v1.36.3 into containerd on worker-1 failed") || !strings.Contains(err.Error(), "no such host") {
		t.Errorf("message %q", err)
	}

	// No containerd root, a bad reference, a relative socket: refused.
	_, err = w.acts.PullCRIImages(t.Context(), host.PullCRIImagesInput{Target: w.tg, Root: filepath.Join(root, "none"), Images: []string{proxy}})
	appErr(t, err, errtype.CommandFailed, true)
	for _, in := range []host.PullCRIImagesInput{
		{Target: w.tg, Images: []string{"registry.k8s.io/kube-proxy"}},
		{Target: w.tg, Images: []string{"x;reboot:1"}},
		{Target: w.tg, Address: "run/containerd.sock", Images: []string{proxy}},
		{Target: w.tg, Root: "/var/lib/../etc", Images: []string{proxy}},
	} {
		_, err := w.acts.PullCRIImages(t.Context(), in)
		appErr(t, err, errtype.InvalidInput, true)
	}
}
