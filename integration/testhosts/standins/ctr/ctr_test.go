package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	apiserver = "registry.k8s.io/kube-apiserver:v1.35.4"
	etcd      = "registry.k8s.io/etcd:3.6.16-0"
)

var apiserverDigest = "sha256:" + strings.Repeat("ab", 32)

// world is a store of the k8s.io namespace holding apiserver and etcd, and
// the environment a run of the stand-in sees: root unless euid is set.
type world struct {
	dir  string
	euid int
	env  map[string]string
	now  time.Time
}

func newWorld(t *testing.T) *world {
	t.Helper()
	dir := t.TempDir()
	store := "# the CRI store\n" + apiserver + " " + apiserverDigest + " /usr/local/sbin/kube-apiserver\n" +
		etcd + " - /usr/local/sbin/etcd\n"
	if err := os.WriteFile(filepath.Join(dir, "cri-image-store"), []byte(store), 0o644); err != nil {
		t.Fatal(err)
	}
	return &world{
		dir: dir,
		env: map[string]string{"KEDGE_LAB_CRI_IMAGE_STORE": filepath.Join(dir, "cri-image-store")},
		now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC),
	}
}

// ctr runs the stand-in in-process.
func (w *world) ctr(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	a := &app{stdout: &o, stderr: &e, getenv: func(k string) string { return w.env[k] }, euid: w.euid,
		now: func() time.Time { return w.now }}
	code = a.run(args)
	return o.String(), e.String(), code
}

// pulls is the pull log's content ("" when there is none).
func (w *world) pulls(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.dir, "pulls"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// Kedge's two commands, exactly as it runs them.
var (
	kedgeList = []string{"-a", "/run/containerd/containerd.sock", "-n", "k8s.io", "images", "ls", "-q"}
	kedgePull = []string{"-a", "/run/containerd/containerd.sock", "-n", "k8s.io", "images", "pull"}
)

func TestListQuietPrintsTheStoresReferences(t *testing.T) {
	w := newWorld(t)
	out, errOut, code := w.ctr(kedgeList...)
	if code != 0 || out != apiserver+"\n"+etcd+"\n" || errOut != "" {
		t.Errorf("ls -q: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestListPrintsATable(t *testing.T) {
	w := newWorld(t)
	out, _, code := w.ctr("-n", "k8s.io", "image", "list")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("ls: exit %d:\n%s", code, out)
	}
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "REF TYPE DIGEST SIZE PLATFORMS LABELS" {
		t.Errorf("header %q", lines[0])
	}
	row := strings.Fields(lines[1])
	if len(row) != 7 || row[0] != apiserver || row[2] != apiserverDigest || row[4] != "MiB" || row[5] != "linux/amd64" || row[6] != "-" {
		t.Errorf("row %q", lines[1])
	}
	if !strings.HasPrefix(lines[2], etcd+" ") || !strings.Contains(lines[2], " sha256:") {
		t.Errorf("an image without a digest in the store has none listed: %q", lines[2])
	}
}

func TestPullOfAStoredImageSucceedsAndIsLogged(t *testing.T) {
	w := newWorld(t)
	out, errOut, code := w.ctr(append(kedgePull, apiserver)...)
	if code != 0 || errOut != "" {
		t.Fatalf("pull: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{apiserver + ":", "resolved", "index-" + apiserverDigest + ":", "elapsed: 0.1 s",
		"unpacking linux/amd64 " + apiserverDigest + "...\n", "\ndone: "} {
		if !strings.Contains(out, want) {
			t.Errorf("pull output lacks %q:\n%s", want, out)
		}
	}
	if got, want := w.pulls(t), "2026-11-26T12:00:00Z ctr "+apiserver+"\n"; got != want {
		t.Errorf("pull log %q, want %q", got, want)
	}
	// By digest and by tag and digest; the flags Kedge may pass.
	byDigest := "registry.k8s.io/kube-apiserver@" + apiserverDigest
	for _, args := range [][]string{
		{byDigest},
		{apiserver + "@" + apiserverDigest},
		{"--platform", "linux/amd64", etcd},
		{"--platform=amd64", "--platform", "linux/arm64", etcd},
		{"--all-platforms", etcd},
	} {
		if out, errOut, code := w.ctr(append(kedgePull, args...)...); code != 0 {
			t.Errorf("pull %q: exit %d %s%s", args, code, out, errOut)
		}
	}
	if n := strings.Count(w.pulls(t), "\n"); n != 6 {
		t.Errorf("%d pulls logged, want 6:\n%s", n, w.pulls(t))
	}
}

func TestPullOfAnImageNotInTheStoreFindsNoRegistry(t *testing.T) {
	w := newWorld(t)
	cases := []struct{ ref, url, host string }{
		{"registry.k8s.io/kube-apiserver:v1.36.0", "https://registry.k8s.io/v2/kube-apiserver/manifests/v1.36.0", "registry.k8s.io"},
		{"registry.k8s.io/kube-apiserver@sha256:" + strings.Repeat("cd", 32), "https://registry.k8s.io/v2/kube-apiserver/manifests/sha256:" + strings.Repeat("cd", 32), "registry.k8s.io"},
		{"docker.io/library/busybox:1.36", "https://registry-1.docker.io/v2/library/busybox/manifests/1.36", "registry-1.docker.io"},
		{"lab.example:5000/x/y:1", "https://lab.example:5000/v2/x/y/manifests/1", "lab.example"},
		// No domain, yet ctr takes "library" for a registry host.
		{"library/busybox:1.36", "https://library/v2/busybox/manifests/1.36", "library"},
	}
	for _, c := range cases {
		out, errOut, code := w.ctr(append(kedgePull, c.ref)...)
		want := `ctr: failed to resolve reference "` + c.ref + `": failed to do request: Head "` + c.url + `": dial tcp: lookup ` + c.host + ": no such host\n"
		if code != 1 || out != "" || !strings.HasSuffix(errOut, want) || !strings.Contains(errOut, `level=info msg="trying next host"`) {
			t.Errorf("pull %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.ref, code, out, errOut, want)
		}
	}
	if got := w.pulls(t); got != "" {
		t.Errorf("failed pulls were logged: %q", got)
	}
}

func TestReferencesCtrCannotResolveAreRefused(t *testing.T) {
	w := newWorld(t)
	cases := []struct{ ref, want string }{
		{"busybox", "object required"},
		{"kube-apiserver:v1.35.4", `parse "dummy://kube-apiserver:v1.35.4": invalid port ":v1.35.4" after host`},
		{"registry.k8s.io/kube-apiserver", "object required"},
		{"https://registry.k8s.io/kube-apiserver:v1.35.4", "invalid reference"},
		{"/kube-apiserver:v1.35.4", "hostname required"},
		{"registry.k8s.io/kube-apiserver@sha256:abc", "invalid checksum digest length"},
		{"registry.k8s.io/kube-apiserver@md5:abc", "unsupported digest algorithm"},
	}
	for _, c := range cases {
		_, errOut, code := w.ctr(append(kedgePull, c.ref)...)
		want := `ctr: failed to resolve reference "` + c.ref + `": ` + c.want + "\n"
		if code != 1 || errOut != want {
			t.Errorf("pull %s: exit %d %q, want 1 %q", c.ref, code, errOut, want)
		}
	}
	if got := w.pulls(t); got != "" {
		t.Errorf("refused pulls were logged: %q", got)
	}
}

func TestCommandLineMistakesAreRefused(t *testing.T) {
	w := newWorld(t)
	cases := []struct {
		args   []string
		code   int
		stdout string // a part of it
		stderr string // all of it
	}{
		{args: []string{"-x", "images", "ls"}, code: 1, stdout: "Incorrect Usage. flag provided but not defined: -x",
			stderr: "ctr: flag provided but not defined: -x\n"},
		{args: append(kedgeList, "-x"), code: 1, stdout: "Incorrect Usage: flag provided but not defined: -x",
			stderr: "ctr: flag provided but not defined: -x\n"},
		{args: append(kedgePull, "--bogus", apiserver), code: 1, stdout: "Incorrect Usage: flag provided but not defined: -bogus",
			stderr: "ctr: flag provided but not defined: -bogus\n"},
		{args: []string{"-n", "k8s.io", "images", "--quiet", "ls"}, code: 1, stdout: "Incorrect Usage: flag provided but not defined: -quiet",
			stderr: "ctr: flag provided but not defined: -quiet\n"},
		{args: []string{"-a"}, code: 1, stderr: "ctr: flag needs an argument: -a\n"},
		{args: []string{"--timeout", "soon", "images", "ls"}, code: 1, stderr: "ctr: invalid value \"soon\" for flag -timeout: parse error\n"},
		{args: []string{"-n", "k8s.io", "images", "ls", "--quiet=false", "-q"}, code: 1, stderr: "ctr: Cannot use two forms of the same flag: q quiet\n"},
		{args: []string{"-n", "k8s.io", "-namespace", "k8s.io", "images", "ls"}, code: 1, stderr: "ctr: Cannot use two forms of the same flag: n namespace\n"},
		{args: kedgePull, code: 1, stderr: "ctr: please provide an image reference to pull\n"},
		{args: append(kedgePull, apiserver, etcd), code: 1,
			stderr: "ctr: the Kedge test world's ctr stand-in pulls exactly one reference, got 2: [\"" + apiserver + "\" \"" + etcd + "\"] (real ctr ignores all but the first)\n"},
		// Flags end at the reference.
		{args: append(kedgePull, apiserver, "--platform", "linux/amd64"), code: 1,
			stderr: "ctr: the Kedge test world's ctr stand-in pulls exactly one reference, got 3: [\"" + apiserver + "\" \"--platform\" \"linux/amd64\"] (real ctr ignores all but the first)\n"},
		{args: append(kedgeList, "name==x"), code: 1, stderr: "ctr: the Kedge test world's ctr stand-in takes no filters (got [\"name==x\"])\n"},
		{args: []string{"frobnicate"}, code: 3, stderr: "No help topic for 'frobnicate'\n"},
		{args: []string{"images", "frobnicate"}, code: 3, stderr: "No help topic for 'frobnicate'\n"},
		{args: []string{"version"}, code: 1, stderr: "ctr: the Kedge test world's ctr stand-in has no \"version\" command (it has images ls and images pull)\n"},
		{args: []string{"-n", "k8s.io", "images", "rm", apiserver}, code: 1,
			stderr: "ctr: the Kedge test world's ctr stand-in has no \"images rm\" command (it has images ls and images pull)\n"},
		{args: append(kedgePull, "-k", apiserver), code: 1, stderr: "ctr: flag -k is not supported by the Kedge test world's ctr stand-in\n"},
		{args: append(kedgePull, "--user", "me:secret", apiserver), code: 1, stderr: "ctr: flag -user is not supported by the Kedge test world's ctr stand-in\n"},
		{args: []string{"--version"}, code: 1, stderr: "ctr: flag -version is not supported by the Kedge test world's ctr stand-in\n"},
		{args: append(kedgePull, "--platform", "bogus//x", apiserver), code: 1,
			stderr: `ctr: invalid platform bogus//x: "" is an invalid component of "bogus//x": platform specifier component must match "^[A-Za-z0-9_-]+$": invalid argument` + "\n"},
		{args: append(kedgePull, "--platform", "linux/arm64", apiserver), code: 1, stderr: "ctr: no match for platform in manifest: not found\n"},
	}
	for _, c := range cases {
		out, errOut, code := w.ctr(c.args...)
		if code != c.code || errOut != c.stderr || !strings.Contains(out, c.stdout) {
			t.Errorf("ctr %q: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr %q", c.args, code, out, errOut, c.code, c.stdout, c.stderr)
		}
	}
	if got := w.pulls(t); got != "" {
		t.Errorf("refused commands pulled: %q", got)
	}
}

// Global flags take both forms, and the namespace comes from the
// environment too.
func TestGlobalFlagForms(t *testing.T) {
	w := newWorld(t)
	for _, args := range [][]string{
		{"--address=/run/containerd/containerd.sock", "--namespace=k8s.io", "images", "ls", "-q"},
		{"-a=unix:///run/containerd/containerd.sock", "-n=k8s.io", "i", "ls", "--quiet"},
		{"--debug", "--timeout", "30s", "--connect-timeout=5s", "-n", "k8s.io", "images", "ls", "-q=true"},
		{"--debug=false", "-namespace", "k8s.io", "image", "list", "-quiet"},
	} {
		if out, errOut, code := w.ctr(args...); code != 0 || out != apiserver+"\n"+etcd+"\n" {
			t.Errorf("ctr %q: exit %d %q %q", args, code, out, errOut)
		}
	}
	w.env["CONTAINERD_NAMESPACE"] = "k8s.io"
	if out, _, code := w.ctr("images", "ls", "-q"); code != 0 || out != apiserver+"\n"+etcd+"\n" {
		t.Errorf("CONTAINERD_NAMESPACE=k8s.io: exit %d %q", code, out)
	}
	if out, _, code := w.ctr("-n", "default", "images", "ls", "-q"); code != 0 || out != "" {
		t.Errorf("-n default overrides CONTAINERD_NAMESPACE: exit %d %q", code, out)
	}
}

func TestOtherNamespacesAreEmpty(t *testing.T) {
	w := newWorld(t)
	for _, args := range [][]string{{"images", "ls", "-q"}, {"-n", "default", "images", "ls", "-q"}, {"-n", "moby", "images", "ls", "-q"}} {
		if out, errOut, code := w.ctr(args...); code != 0 || out != "" || errOut != "" {
			t.Errorf("ctr %q: exit %d %q %q, want nothing", args, code, out, errOut)
		}
	}
	if out, _, code := w.ctr("images", "ls"); code != 0 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "REF ") {
		t.Errorf("ls in the default namespace: exit %d:\n%s", code, out)
	}
	_, errOut, code := w.ctr("images", "pull", apiserver)
	if code != 1 || !strings.Contains(errOut, "lookup registry.k8s.io: no such host") {
		t.Errorf("pull into the default namespace: exit %d %q", code, errOut)
	}
	for ns, want := range map[string]string{
		"":    "ctr: failed to list images: namespace is required: failed precondition\n",
		"a b": `ctr: failed to list images: namespace validation: identifier "a b" must match ^[A-Za-z0-9]+(?:[._-](?:[A-Za-z0-9]+))*$: invalid argument` + "\n",
	} {
		if _, errOut, code := w.ctr("-n", ns, "images", "ls"); code != 1 || errOut != want {
			t.Errorf("-n %q: exit %d %q, want %q", ns, code, errOut, want)
		}
	}
	if got := w.pulls(t); got != "" {
		t.Errorf("pulls logged: %q", got)
	}
}

// Only root may open containerd's socket, and there is no other.
func TestTheSocketIsRootsOnly(t *testing.T) {
	w := newWorld(t)
	w.euid = 1500
	denied := `ctr: failed to dial "/run/containerd/containerd.sock": connection error: desc = "transport: error while dialing: dial unix /run/containerd/containerd.sock: connect: permission denied"` + "\n"
	for _, args := range [][]string{kedgeList, append(kedgePull, apiserver), {"images", "ls"}} {
		if out, errOut, code := w.ctr(args...); code != 1 || out != "" || errOut != denied {
			t.Errorf("ctr %q as euid 1500: exit %d %q %q, want 1 %q", args, code, out, errOut, denied)
		}
	}
	w.euid = 0
	for _, addr := range []string{"/run/containerd/other.sock", "/var/run/docker.sock"} {
		want := `ctr: failed to dial "` + addr + `": context deadline exceeded: connection error: desc = "transport: error while dialing: dial unix://` + addr + `: timeout"` + "\n"
		if _, errOut, code := w.ctr("-a", addr, "-n", "k8s.io", "images", "pull", apiserver); code != 1 || errOut != want {
			t.Errorf("-a %s: exit %d %q, want %q", addr, code, errOut, want)
		}
	}
	if got := w.pulls(t); got != "" {
		t.Errorf("pulls logged: %q", got)
	}
}

// The built program: main's exit statuses and the store it finds.
func TestTheBuiltProgram(t *testing.T) {
	w := newWorld(t)
	bin := filepath.Join(t.TempDir(), "ctr")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	run := func(args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"KEDGE_LAB_CRI_IMAGE_STORE=" + w.env["KEDGE_LAB_CRI_IMAGE_STORE"]}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return o.String(), e.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), 0
	}
	if _, _, code := run("frobnicate"); code != 3 {
		t.Errorf("unknown command: exit %d, want 3", code)
	}
	out, errOut, code := run(kedgeList...)
	if os.Geteuid() == 0 {
		if code != 0 || out != apiserver+"\n"+etcd+"\n" {
			t.Errorf("ls -q as root: exit %d %q %q", code, out, errOut)
		}
	} else if code != 1 || !strings.Contains(errOut, "permission denied") {
		t.Errorf("ls -q as euid %d: exit %d %q %q", os.Geteuid(), code, out, errOut)
	}
}
