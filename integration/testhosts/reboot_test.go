package testhosts

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// rebootLab is one fresh host of family f (empty: the machine's OS).
func rebootLab(t *testing.T, base string, f OSFamily) *Lab {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real sshd hosts")
	}
	l, err := Start(context.Background(), Options{Count: 1, BaseIP: base, Dir: t.TempDir(), OS: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// run runs cmd in a new session, returning its combined output and error.
func run(c *ssh.Client, cmd string) (string, error) {
	s, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	return strings.TrimSpace(string(out)), err
}

// redial dials h until it answers (as a client waits for a rebooting
// host), within a minute.
func redial(t *testing.T, l *Lab, h *Host) *ssh.Client {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := dialAs(l, h, l.User)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come back: %v", h.Name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rebootOverSSH reboots the host as Kedge does (sudo -n systemctl reboot
// as the login user) and checks what a client sees: the command returns
// at once with exit 0, then the session in flight drops and the host is
// unreachable for a moment. It returns a client of the rebooted host.
func rebootOverSSH(t *testing.T, l *Lab, h *Host, c *ssh.Client) *ssh.Client {
	t.Helper()
	boots := h.Boots()
	// A session in flight, as a watcher's would be.
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	dropped := make(chan error, 1)
	go func() { dropped <- s.Run("sleep 60") }()
	began := time.Now()
	if out, err := run(c, "sudo -n systemctl reboot"); err != nil || out != "" {
		t.Fatalf("sudo -n systemctl reboot: %v %q", err, out)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("systemctl reboot took %s to return", took)
	}
	select {
	case err := <-dropped:
		var exit *ssh.ExitError
		if err == nil || errors.As(err, &exit) && exit.ExitStatus() == 0 {
			t.Errorf("the session in flight ended cleanly (%v), not dropped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the session in flight did not drop within 10s of the reboot")
	}
	// The old connection is gone with the host: a new session fails, or
	// (its peer vanished without a word) never answers.
	answered := make(chan error, 1)
	go func() { _, err := run(c, "true"); answered <- err }()
	select {
	case err := <-answered:
		if err == nil {
			t.Error("the old connection still runs commands after the reboot")
		}
	case <-time.After(10 * time.Second):
		c.Close()
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := h.WaitBoot(ctx, boots+1); err != nil {
		out, _ := exec.Command("ps", "-o", "pid,ppid,stat,args", "--ppid", strconv.Itoa(h.PID()), "-p", strconv.Itoa(h.PID())).CombinedOutput()
		t.Fatalf("boot %d: %v\nthe host's init and its children:\n%s", boots+1, err, out)
	}
	return redial(t, l, h)
}

// A reboot is a reboot: every process of the host ends, sessions drop,
// and the host boots with a new boot ID (the machine's untouched), fresh
// /run and /tmp, its disk kept, its wanted units started again.
func TestSystemctlRebootRebootsTheHost(t *testing.T) {
	l := rebootLab(t, "127.0.80.", "")
	h := l.Hosts[0]
	c := dial(t, l, h)
	machineBoot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	before := sh(t, c, "cat /proc/sys/kernel/random/boot_id")
	if before == strings.TrimSpace(string(machineBoot)) || len(before) != 36 {
		t.Fatalf("the host's boot ID %q is the machine's or no UUID", before)
	}
	if id, err := h.BootID(); err != nil || id != before {
		t.Errorf("BootID() = %q %v, the host says %q", id, err, before)
	}
	sh(t, c, asRoot(`echo run > /run/mark; echo tmp > /tmp/mark; echo disk > /var/lib/mark; echo etc > /etc/mark
printf '[Service]\nExecStart=/bin/sleep 1000\n[Install]\nWantedBy=multi-user.target\n' > /etc/systemd/system/sleeper.service
printf '[Service]\nExecStart=/bin/sleep 1000\n' > /etc/systemd/system/idle.service
systemctl enable --now sleeper && systemctl start idle`))
	if out, err := run(c, "systemctl reboot --frobnicate"); err == nil {
		t.Errorf("systemctl reboot with an unknown option: %q", out)
	}
	pid, oldUnit := h.PID(), sh(t, c, asRoot("systemctl show -p MainPID --value sleeper"))
	procs := descendants(pid)

	c = rebootOverSSH(t, l, h, c)
	for _, p := range append(procs, pid) {
		if processAlive(p) {
			t.Errorf("process %d of the old boot survived the reboot", p)
		}
	}
	after := sh(t, c, "cat /proc/sys/kernel/random/boot_id")
	if after == before || len(after) != 36 {
		t.Errorf("boot ID after the reboot %q (before %q)", after, before)
	}
	if now, _ := os.ReadFile("/proc/sys/kernel/random/boot_id"); string(now) != string(machineBoot) {
		t.Errorf("the machine's boot ID changed: %q -> %q", machineBoot, now)
	}
	if got := sh(t, c, "cat /run/mark /tmp/mark 2>/dev/null; cat /var/lib/mark /etc/mark; test -d /run/lock && echo lock"); got != "disk\netc\nlock" {
		t.Errorf("after the reboot /run, /tmp, /var/lib, /etc hold %q; want only the disk's", got)
	}
	if got := sh(t, c, asRoot("systemctl is-active sleeper; systemctl is-active idle || true")); got != "active\ninactive" {
		t.Errorf("units after the reboot: %q; want the enabled one active, the other not", got)
	}
	if newUnit := sh(t, c, asRoot("systemctl show -p MainPID --value sleeper")); newUnit == oldUnit {
		t.Errorf("the unit kept its process %s", newUnit)
	}
	if h.Boots() != 2 || h.PID() == pid || h.PID() == 0 {
		t.Errorf("Boots() = %d, PID %d (was %d)", h.Boots(), h.PID(), pid)
	}
	// Reboot (the chaos fault) is the same reboot.
	if err := h.Reboot(t.Context()); err != nil {
		t.Fatal(err)
	}
	if id, err := h.BootID(); err != nil || id == after || h.Boots() != 3 {
		t.Errorf("after Reboot: boot ID %q (%v), boots %d", id, err, h.Boots())
	}
	c = redial(t, l, h)
	if got := sh(t, c, asRoot("systemctl is-active sleeper")); got != "active" {
		t.Errorf("sleeper after Reboot: %s", got)
	}
}

func processAlive(pid int) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
	return err == nil && !isZombie(pid)
}
