package sshhost

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
)

// needRootAndSetpriv skips a test that checks files as other users.
func needRootAndSetpriv(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("checks as other users need root")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
}

// enterableDir is a temporary directory every user can enter (t.TempDir's
// parent is root's 0700).
func enterableDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "kedge-readable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestReadableScriptRunsTheTestAsTheReader(t *testing.T) {
	s, err := readableScript([]host.FileReader{
		{Path: "/etc/kubernetes/pki/apiserver.key", Reader: "kube-apiserver", User: "65534"},
		{Path: "/etc/ssl/etcd/etcd/server.key", Reader: "etcd", User: "232", Group: "232", Groups: []string{"10", "wheel"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`setpriv --reuid="$1" --regid="$2" "$sg" -- sh -c 'if test "$1" "$2"; then echo yes; else echo no; fi'`,
		`r=$(as "$u" "$g" "$gs" -r "$p")`,
		"check 0 '/etc/kubernetes/pki/apiserver.key' '65534' '' ''\n",
		"check 1 '/etc/ssl/etcd/etcd/server.key' '232' '232' '10 wheel'\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the script lacks %q:\n%s", want, s)
		}
	}
	for _, bad := range []host.FileReader{
		{Path: "/etc/x'; reboot; '", Reader: "x", User: "0"},
		{Path: "etc/relative", Reader: "x", User: "0"},
		{Path: "/etc/kubernetes/../shadow", Reader: "x", User: "0"},
		{Path: "/etc/x", Reader: "x", User: "0; reboot"},
		{Path: "/etc/x", Reader: "x", User: "0", Group: "$(reboot)"},
		{Path: "/etc/x", Reader: "x", User: "0", Groups: []string{"a b"}},
		{Path: "/etc/x", Reader: "x", User: ""},
	} {
		if _, err := readableScript([]host.FileReader{bad}); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
}

// A key the API server (nobody) cannot read is refused, naming the file,
// its owner and mode, the reader and its uid; readable keys pass, and a
// directory on the way that the reader cannot enter is named.
func TestCheckReadableAsTheProcessUser(t *testing.T) {
	needRootAndSetpriv(t)
	w := newWorld(t)
	root := enterableDir(t)
	pki := filepath.Join(root, "pki")
	etcd := filepath.Join(root, "etcd")
	for _, d := range []string{root, pki} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(etcd, 0o500); err != nil {
		t.Fatal(err)
	}
	write := func(p string, mode os.FileMode, uid, gid int) {
		t.Helper()
		if err := os.WriteFile(p, []byte("KEY"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	open, closed, etcdKey := filepath.Join(pki, "apiserver.crt"), filepath.Join(pki, "apiserver.key"), filepath.Join(etcd, "server.key")
	write(open, 0o644, 0, 0)
	write(closed, 0o600, 0, 0)
	write(etcdKey, 0o500, 232, 232)
	if err := os.Chown(etcd, 232, 232); err != nil {
		t.Fatal(err)
	}
	nobody := func(p string) host.FileReader {
		return host.FileReader{Path: p, Reader: "kube-apiserver", User: "65534", From: "/etc/kubernetes/manifests/kube-apiserver.yaml: securityContext"}
	}

	res, err := w.acts.CheckReadable(t.Context(), host.CheckReadableInput{Target: w.tg, Files: []host.FileReader{
		nobody(open),
		{Path: etcdKey, Reader: "etcd", User: "232", Group: "232"},
		{Path: closed, Reader: "kube-controller-manager", User: "0"},
	}})
	if err != nil || len(res.Checked) != 3 {
		t.Fatalf("readable files: %+v %v", res, err)
	}
	if !strings.Contains(res.Checked[0], "kube-apiserver (uid 65534 gid 65534)") {
		t.Errorf("checked: %q", res.Checked)
	}

	_, err = w.acts.CheckReadable(t.Context(), host.CheckReadableInput{Target: w.tg, Files: []host.FileReader{nobody(open), nobody(closed)}})
	appErr(t, err, errtype.Unreadable, true)
	for _, want := range []string{"kube-apiserver (uid 65534 gid 65534) cannot read " + closed + " (root:root 600)", "worker-1", "kube-apiserver.yaml: securityContext"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), open+" (") {
		t.Errorf("error names the readable file: %v", err)
	}

	// etcd's directory is etcd's, 0500: nobody else gets in.
	_, err = w.acts.CheckReadable(t.Context(), host.CheckReadableInput{Target: w.tg, Files: []host.FileReader{nobody(etcdKey)}})
	appErr(t, err, errtype.Unreadable, true)
	if !strings.Contains(err.Error(), "cannot enter "+etcd+": ") || !strings.Contains(err.Error(), " 500)") {
		t.Errorf("error %q does not name the directory", err)
	}

	// A group given by number reads a 0640 file of that group.
	write(closed, 0o640, 0, 4242)
	if _, err := w.acts.CheckReadable(t.Context(), host.CheckReadableInput{Target: w.tg, Files: []host.FileReader{
		{Path: closed, Reader: "kube-scheduler", User: "65534", Groups: []string{"4242"}},
	}}); err != nil {
		t.Errorf("read through a supplementary group: %v", err)
	}
	// A user the host does not know by name cannot be checked.
	_, err = w.acts.CheckReadable(t.Context(), host.CheckReadableInput{Target: w.tg, Files: []host.FileReader{{Path: open, Reader: "etcd", User: "no-such-user-kedge"}}})
	appErr(t, err, errtype.Unreadable, true)
	if !strings.Contains(err.Error(), "no user no-such-user-kedge") {
		t.Errorf("unknown user: %v", err)
	}
}

// A file a bundle creates gets the owner it names; one it replaces keeps
// its own owner and group, and the mode given.
func TestInstallBundleOwnerOfCreatedFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	w := newWorld(t)
	root := t.TempDir()
	kept, made := filepath.Join(root, "kept.key"), filepath.Join(root, "made.key")
	if err := os.WriteFile(kept, []byte("old"), 0o500); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(kept, 232, 233); err != nil {
		t.Fatal(err)
	}
	res, err := w.acts.InstallBundle(t.Context(), host.InstallBundleInput{Target: w.tg, Files: []host.BundleFile{
		{Path: kept, Content: "new", Mode: "0500", Owner: "65534:65534"},
		{Path: made, Content: "new", Mode: "0644", Owner: "232:234"},
	}})
	if err != nil || !res.Changed {
		t.Fatalf("%+v %v", res, err)
	}
	for p, want := range map[string][3]int{kept: {232, 233, 0o500}, made: {232, 234, 0o644}} {
		st := statOwner(t, p)
		if st != want {
			t.Errorf("%s: uid, gid, mode %v, want %v", p, st, want)
		}
	}
	if _, err := w.acts.InstallBundle(t.Context(), host.InstallBundleInput{Target: w.tg, Files: []host.BundleFile{{Path: made, Content: "x", Owner: "root;reboot"}}}); err == nil {
		t.Error("an owner with a shell character was accepted")
	}
}

func statOwner(t *testing.T, p string) [3]int {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Fatal("no stat")
	}
	return [3]int{int(st.Uid), int(st.Gid), int(fi.Mode().Perm())}
}
