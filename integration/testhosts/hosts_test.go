package testhosts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func startLab(t *testing.T, n int, base string) *Lab {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real sshd hosts")
	}
	l, err := Start(context.Background(), Options{Count: n, BaseIP: base, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func dial(t *testing.T, l *Lab, h *Host) *ssh.Client {
	t.Helper()
	c, err := dialAs(l, h, l.User)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func dialAs(l *Lab, h *Host, user string) (*ssh.Client, error) {
	key, err := os.ReadFile(l.IdentityFile)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		return nil, err
	}
	hk, err := knownhosts.New(l.KnownHostsFile)
	if err != nil {
		return nil, err
	}
	return ssh.Dial("tcp", fmt.Sprintf("%s:%d", h.Address, h.Port), &ssh.ClientConfig{
		User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: hk,
	})
}

// asRoot is cmd run as root through the login user's sudo.
func asRoot(cmd string) string {
	return "sudo -n sh -c '" + strings.ReplaceAll(cmd, "'", `'\''`) + "'"
}

func sh(t *testing.T, c *ssh.Client, cmd string) string {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	if err != nil {
		t.Fatalf("%q: %v: %s", cmd, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestHostsAreIsolatedAndServicesRun(t *testing.T) {
	l := startLab(t, 3, "127.0.30.")
	c1, c2 := dial(t, l, l.Hosts[0]), dial(t, l, l.Hosts[1])

	sh(t, c1, asRoot("mkdir -p /etc/isolation && echo one > /etc/isolation/f && echo x > /var/lib/only-here && echo t > /tmp/t"))
	if got := sh(t, c2, "cat /etc/isolation/f /var/lib/only-here /tmp/t 2>/dev/null || echo absent"); got != "absent" {
		t.Errorf("host 2 sees host 1's files: %q", got)
	}
	if _, err := os.Stat("/etc/isolation/f"); err == nil {
		t.Error("the machine sees a host's file")
	}
	if data, err := l.Hosts[0].ReadFile("/etc/isolation/f"); err != nil || string(data) != "one\n" {
		t.Errorf("ReadFile: %q %v", data, err)
	}
	if got := sh(t, c1, asRoot("ls -A /root | tr '\\n' ' '")); strings.Contains(got, ".bashrc") {
		t.Errorf("/root is not clean: %s", got)
	}

	// systemctl stand-in: unit + drop-in, start, restart, stop.
	sh(t, c1, asRoot(`mkdir -p /etc/systemd/system/sleeper.service.d
cat > /etc/systemd/system/sleeper.service <<'E'
[Service]
Environment=GREETING=base
ExecStart=/bin/sleep 1000
E
cat > /etc/systemd/system/sleeper.service.d/10-env.conf <<'E'
[Service]
Environment="GREETING=from drop-in"
E`))
	sh(t, c1, asRoot("systemctl daemon-reload && systemctl enable sleeper && systemctl start sleeper"))
	if got := sh(t, c1, asRoot("systemctl is-active sleeper")); got != "active" {
		t.Fatalf("is-active = %q", got)
	}
	pid1 := sh(t, c1, asRoot("systemctl show -p MainPID --value sleeper"))
	env := sh(t, c1, asRoot("tr '\\0' '\\n' < /proc/"+pid1+"/environ | grep GREETING"))
	if env != "GREETING=from drop-in" {
		t.Errorf("drop-in environment not applied: %q", env)
	}
	sh(t, c1, asRoot("systemctl restart sleeper"))
	pid2 := sh(t, c1, asRoot("systemctl show -p MainPID --value sleeper"))
	if pid2 == pid1 || pid2 == "0" {
		t.Errorf("restart kept pid %s -> %s", pid1, pid2)
	}
	// A stop returns only once the unit's supervisor has recorded its
	// main process's end, as systemd waits for a unit's processes: with
	// the supervisor held (SIGSTOP) for 4 s the stop takes as long, and
	// the start after it is not failed by the late supervisor's record.
	sup := sh(t, c1, asRoot("cat /run/systemctl/sleeper.service.supervisor"))
	sh(t, c1, asRoot("kill -STOP "+sup))
	const held = 4 * time.Second
	released := make(chan error, 1)
	go func() {
		time.Sleep(held)
		s, err := c1.NewSession()
		if err == nil {
			defer s.Close()
			_, err = s.CombinedOutput(asRoot("kill -CONT " + sup))
		}
		released <- err
	}()
	began := time.Now()
	sh(t, c1, asRoot("systemctl stop sleeper"))
	if took := time.Since(began); took < held {
		t.Errorf("systemctl stop returned after %s while the unit's supervisor was held for %s", took.Round(time.Millisecond), held)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	sh(t, c1, asRoot("systemctl start sleeper"))
	sh(t, c1, asRoot("systemctl stop sleeper"))
	if got := sh(t, c1, asRoot("systemctl is-active sleeper || true")); got != "inactive" {
		t.Errorf("after stop: %q", got)
	}
	sh(t, c1, asRoot("systemctl start sleeper"))

	// Close kills everything each host started and leaves no mounts.
	pid := l.Hosts[0].PID()
	children := descendants(pid)
	if len(children) == 0 {
		t.Fatal("no processes under the host")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Killed processes end when the kernel gets to them: on a busy
	// machine that is not at once, so each is waited for, a while.
	for _, p := range append(children, pid) {
		deadline := time.Now().Add(15 * time.Second)
		for syscall.Kill(p, 0) == nil && !isZombie(p) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if syscall.Kill(p, 0) == nil && !isZombie(p) {
			t.Errorf("process %d survived Close by 15 s", p)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), l.dir) {
		t.Error("lab mounts left behind")
	}
}

func descendants(pid int) []int {
	var out []int
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, f := range strings.Fields(string(data)) {
		c, _ := strconv.Atoi(f)
		out = append(out, c)
		out = append(out, descendants(c)...)
	}
	return out
}

func isZombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err != nil || strings.Contains(string(data), ") Z ")
}

func TestParallelSSHReachesEveryHost(t *testing.T) {
	if _, err := exec.LookPath("parallel-ssh"); err != nil {
		t.Fatalf("parallel-ssh missing (make deps): %v", err)
	}
	l := startLab(t, 3, "127.0.31.")
	hosts := filepath.Join(t.TempDir(), "hosts")
	var lines []string
	for _, h := range l.Hosts {
		lines = append(lines, l.User+"@"+h.Address)
	}
	os.WriteFile(hosts, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	out, err := exec.Command("parallel-ssh", "-h", hosts, "-i", "-O", "IdentityFile="+l.IdentityFile,
		"-O", "UserKnownHostsFile="+l.KnownHostsFile, "-O", "StrictHostKeyChecking=yes", "-O", "BatchMode=yes", "echo ok").CombinedOutput()
	if err != nil {
		t.Fatalf("parallel-ssh: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "[SUCCESS]"); n != 3 {
		t.Errorf("%d successes:\n%s", n, out)
	}
}

func TestHostsLogInLikeAFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real sshd hosts")
	}
	l, err := Start(context.Background(), Options{Count: 2, BaseIP: "127.0.32.", Dir: t.TempDir(), SudoPassword: []string{"host-2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	c := dial(t, l, l.Hosts[0])
	if got := sh(t, c, "id -un; id -u"); got != "core\n1500" {
		t.Errorf("login user: %q, want core (1500)", got)
	}
	if got := sh(t, c, "sudo -n id -u"); got != "0" {
		t.Errorf("sudo -n id -u = %q, want 0", got)
	}
	if got := sh(t, c, "touch /etc/kedge-probe 2>&1 || echo refused"); !strings.Contains(got, "refused") {
		t.Errorf("core wrote /etc without sudo: %q", got)
	}
	if _, err := dialAs(l, l.Hosts[0], "root"); err == nil {
		t.Error("sshd let root log in; a fleet's hosts refuse it")
	}
	// host-2's sudo wants a password: sudo -n refuses at once.
	c2 := dial(t, l, l.Hosts[1])
	s, err := c2.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.CombinedOutput("sudo -n true")
	if err == nil || !strings.Contains(string(out), "password is required") {
		t.Errorf("sudo -n on host-2: err %v, output %q; want a refusal", err, out)
	}

	root, err := Start(context.Background(), Options{Count: 1, BaseIP: "127.0.33.", Dir: t.TempDir(), RootLogin: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = root.Close() })
	rc, err := dialAs(root, root.Hosts[0], "root")
	if err != nil {
		t.Fatalf("RootLogin: %v", err)
	}
	defer rc.Close()
	if got := sh(t, rc, "id -u"); got != "0" {
		t.Errorf("root login: id -u = %q", got)
	}
}
