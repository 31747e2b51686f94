package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// standIn builds the stand-in as docker and podman, with a store holding
// lab.example/sh:1 (entrypoint /bin/sh) and a private state directory.
func standIn(t *testing.T) (run func(name string, args ...string) (string, int), dir string) {
	t.Helper()
	dir = t.TempDir()
	bin := filepath.Join(dir, "docker")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "podman")); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	digest := "sha256:" + strings.Repeat("ab", 32)
	if err := os.WriteFile(store, []byte("# test store\nlab.example/sh:1 "+digest+" /bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "KEDGE_LAB_IMAGE_STORE="+store, "KEDGE_LAB_CONTAINER_STATE="+filepath.Join(dir, "state"))
	return func(name string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(filepath.Join(dir, name), args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}, dir
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("containers need root (mount namespaces)")
	}
}

func TestUnknownFlagsAndCommandsAreRefused(t *testing.T) {
	run, _ := standIn(t)
	cases := []struct {
		prog string
		args []string
		code int
		want string
	}{
		{"docker", []string{"run", "--foo", "lab.example/sh:1"}, 125, "unknown flag: --foo"},
		{"podman", []string{"run", "--foo", "lab.example/sh:1"}, 125, "Error: unknown flag: --foo"},
		{"docker", []string{"run", "-X", "lab.example/sh:1"}, 125, `unknown shorthand flag: "X" in -X`},
		{"docker", []string{"rm", "--bogus", "x"}, 1, "unknown flag: --bogus"},
		{"docker", []string{"ps", "--filter", "name=x"}, 1, "unknown flag: --filter"},
		{"docker", []string{"frobnicate"}, 1, "docker: 'frobnicate' is not a docker command."},
		{"podman", []string{"frobnicate"}, 125, "Error: unrecognized command `podman frobnicate`"},
		{"docker", []string{"run", "-v", "/tmp:/x:bogus", "lab.example/sh:1"}, 125, "invalid mode: bogus"},
		{"docker", []string{"run", "-v", "/tmp:relative", "lab.example/sh:1"}, 125, "mount path must be absolute"},
		{"docker", []string{"run", "--ulimit", "nofile", "lab.example/sh:1"}, 125, "invalid ulimit argument"},
		{"docker", []string{"run", "--network", "bridge", "lab.example/sh:1"}, 125, "not supported"},
		{"podman", []string{"run", "-v", "/does/not/exist:/x", "lab.example/sh:1"}, 125, "statfs /does/not/exist: no such file or directory"},
	}
	for _, c := range cases {
		out, code := run(c.prog, c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%s %q: exit %d %q, want %d %q", c.prog, c.args, code, out, c.code, c.want)
		}
	}
}

func TestImagesComeFromTheLocalStoreOnly(t *testing.T) {
	run, _ := standIn(t)
	for _, ref := range []string{"lab.example/other:1", "lab.example/sh:2", "lab.example/sh", "lab.example/s:1",
		"lab.example/sh@sha256:" + strings.Repeat("cd", 32)} {
		if out, code := run("docker", "pull", ref); code != 1 || !strings.Contains(out, "pull access denied for") {
			t.Errorf("pull %s: exit %d %q", ref, code, out)
		}
		if out, code := run("docker", "run", "--rm", ref); code != 125 || !strings.Contains(out, "Unable to find image '"+ref+"' locally") {
			t.Errorf("run %s: exit %d %q", ref, code, out)
		}
		if out, code := run("podman", "run", "--rm", ref); code != 125 || !strings.Contains(out, "image not known") {
			t.Errorf("podman run %s: exit %d %q", ref, code, out)
		}
	}
	for _, ref := range []string{"lab.example/sh:1", "lab.example/sh@sha256:" + strings.Repeat("ab", 32)} {
		if out, code := run("docker", "pull", ref); code != 0 || !strings.Contains(out, "Image is up to date") {
			t.Errorf("pull %s: exit %d %q", ref, code, out)
		}
	}
	if out, code := run("docker", "image", "inspect", "--format", "{{.Id}}", "lab.example/sh:1"); code != 0 || !strings.Contains(out, "sha256:abab") {
		t.Errorf("image inspect: exit %d %q", code, out)
	}
	if out, code := run("docker", "image", "inspect", "lab.example/sh:9"); code != 1 || !strings.Contains(out, "No such image") {
		t.Errorf("image inspect of a missing image: exit %d %q", code, out)
	}
	needRoot(t)
	if out, code := run("docker", "run", "--rm", "lab.example/sh@sha256:"+strings.Repeat("ab", 32), "-c", "echo by digest"); code != 0 || out != "by digest\n" {
		t.Errorf("run by digest: exit %d %q", code, out)
	}
}

func TestContainerSeesOnlyItsVolumes(t *testing.T) {
	needRoot(t)
	run, dir := standIn(t)
	shared, secret := filepath.Join(dir, "shared"), filepath.Join(dir, "secret")
	for _, d := range []string{shared, secret} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"), []byte(filepath.Base(d)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hostFile := filepath.Join(dir, "machine-id")
	if err := os.WriteFile(hostFile, []byte("0123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `cat /data/f; echo; cat /etc/machine-id
for p in ` + secret + ` ` + shared + ` /etc/shadow /etc/os-release /var/lib /lib/modules/x; do [ -e "$p" ] && echo "VISIBLE $p"; done
touch /data/new 2>/dev/null && echo "WRITABLE /data"
echo $GREETING $KEDGE_LAB_IMAGE`
	out, code := run("docker", "run", "--rm", "-v", shared+":/data:ro", "--volume="+hostFile+":/etc/machine-id:ro",
		"-e", "GREETING=hello", "--privileged", "--pid", "host", "--network", "host", "--ulimit", "nofile=1024:2048",
		"lab.example/sh:1", "-c", script)
	want := "shared\n0123\nhello lab.example/sh:1\n"
	if code != 0 || out != want {
		t.Errorf("container: exit %d\n%s\nwant\n%s", code, out, want)
	}
	// Without the volume, the same path is not there.
	if out, code := run("docker", "run", "--rm", "lab.example/sh:1", "-c", "cat "+shared+"/f"); code == 0 || !strings.Contains(out, "No such file or directory") {
		t.Errorf("unmounted path read: exit %d %q", code, out)
	}
}

func TestDetachedContainerLogsStopAndRemove(t *testing.T) {
	needRoot(t)
	run, _ := standIn(t)
	out, code := run("docker", "run", "-d", "--name", "bg", "lab.example/sh:1", "-c", "echo started; exec sleep 100")
	id := strings.TrimSpace(out)
	if code != 0 || len(id) != 64 {
		t.Fatalf("run -d: exit %d %q", code, out)
	}
	if out, code := run("docker", "run", "--name", "bg", "lab.example/sh:1", "-c", "true"); code != 125 || !strings.Contains(out, `Conflict. The container name "/bg" is already in use`) {
		t.Errorf("second bg: exit %d %q", code, out)
	}
	if out, _ := run("docker", "ps", "--format", "{{.Names}} {{.State}}"); out != "bg running\n" {
		t.Errorf("ps: %q", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _ := run("docker", "logs", "bg")
		if out == "started\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs: %q", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, code := run("docker", "rm", "bg"); code != 1 || !strings.Contains(out, "container is running") {
		t.Errorf("rm of a running container: exit %d %q", code, out)
	}
	if out, code := run("docker", "stop", "-t", "2", "bg"); code != 0 || out != "bg\n" {
		t.Errorf("stop: exit %d %q", code, out)
	}
	if out, _ := run("docker", "ps", "-a", "--format", "{{.Names}} {{.State}}"); out != "bg exited\n" {
		t.Errorf("ps -a after stop: %q", out)
	}
	if out, code := run("docker", "kill", "bg"); code != 1 || !strings.Contains(out, "is not running") {
		t.Errorf("kill of a stopped container: exit %d %q", code, out)
	}
	if out, code := run("docker", "rm", "bg"); code != 0 || out != "bg\n" {
		t.Errorf("rm: exit %d %q", code, out)
	}
	if out, code := run("docker", "rm", "bg"); code != 1 || !strings.Contains(out, "No such container: bg") {
		t.Errorf("rm again: exit %d %q", code, out)
	}
	if _, code := run("docker", "rm", "--force", "bg"); code != 0 {
		t.Errorf("rm --force of a missing container: exit %d", code)
	}
	// --rm: the name is free again once the process ends.
	if out, code := run("docker", "run", "--rm", "--name", "once", "lab.example/sh:1", "-c", "exit 3"); code != 3 {
		t.Errorf("run --rm exit 3: exit %d %q", code, out)
	}
	if out, code := run("docker", "run", "--rm", "--name", "once", "--entrypoint", "-c", "lab.example/sh:1", "echo again"); code != 0 || out != "again\n" {
		t.Errorf("run --rm again with --entrypoint: exit %d %q", code, out)
	}
}

// --network none gives the container a network namespace of its own (only
// a loopback device); host is the host's; other modes are refused.
func TestNetworkNoneAndHost(t *testing.T) {
	needRoot(t)
	run, _ := standIn(t)
	links := "tail -n +3 /proc/self/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '"
	out, code := run("docker", "run", "--rm", "--network", "none", "lab.example/sh:1", "-c", links)
	if code != 0 || strings.TrimSpace(out) != "lo" {
		t.Errorf("--network none: exit %d, links %q, want only lo", code, out)
	}
	hostLinks, err := exec.Command("sh", "-c", links).Output()
	if err != nil {
		t.Fatal(err)
	}
	if out, code := run("podman", "run", "--rm", "--network=host", "lab.example/sh:1", "-c", links); code != 0 || out != string(hostLinks) {
		t.Errorf("--network=host: exit %d, links %q, want the host's %q", code, out, hostLinks)
	}
	if out, code := run("docker", "run", "--rm", "--network", "bridge", "lab.example/sh:1", "-c", "true"); code == 0 || !strings.Contains(out, "--network bridge is not supported") {
		t.Errorf("--network bridge: exit %d %q", code, out)
	}
}
