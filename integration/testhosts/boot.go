package testhosts

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kedge.dev/kedge/integration/testhosts/standins/osstate"
)

// A host's life: Start boots it (sshd as the init of fresh namespaces);
// a reboot — `systemctl reboot` on the host, or Reboot — ends every
// process of the host, and the harness boots it again, as a machine
// would: a new boot ID, fresh /run and /tmp, what the OS's update tool
// staged applied, then the units its targets want started. Its address,
// host key and disk (/etc, /var/lib, /var/log, /opt) stay.

// The host's directories (under Dir) the harness keeps for it.
const (
	// worldDir is bound at osstate.WorldDir inside the host.
	worldDir = "world"
	// bootDir holds this boot's boot_id (and a Debian-family host's
	// booted kernel release, osrelease), bound over /proc inside.
	bootDir = "boot"
)

// rebootDowntime is how long a rebooting host stays down (unreachable)
// before it boots again.
const rebootDowntime = 300 * time.Millisecond

// ErrHostDown is returned for a host that is not running: between a
// reboot's going down and its boot, or after a crash or Close.
var ErrHostDown = errors.New("the host is down")

// pid is the host's init (sshd) as the machine sees it, 0 while down.
func (h *Host) pid() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.initPID
}

// PID is the host's sshd as the machine sees it (PID 1 of the host). It
// changes with every boot, and is 0 while the host is down.
func (h *Host) PID() int { return h.pid() }

// Boots is how many times the host has booted: 1 after Start, one more
// with every reboot, counted once the boot's units were started.
func (h *Host) Boots() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.boots
}

// BootID is the boot ID the running host's kernel reports
// (/proc/sys/kernel/random/boot_id inside it): new with every boot, and
// never the machine's.
func (h *Host) BootID() (string, error) {
	b, err := h.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("boot ID of %s: %w", h.Name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// notify wakes whoever waits for the host's state to change; h.mu is
// held.
func (h *Host) notify() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// WaitBoot waits until the host has booted n times (Boots() >= n) and
// returns what starting the units of its last boot said; it fails when
// the host stays down (a crash, Close) or ctx ends first.
func (h *Host) WaitBoot(ctx context.Context, n int) error {
	for {
		h.mu.Lock()
		boots, bootErr, ended, changed := h.boots, h.bootErr, h.ended, h.changed
		h.mu.Unlock()
		switch {
		case boots >= n:
			return bootErr
		case ended != nil:
			return fmt.Errorf("host %s: %w", h.Name, ended)
		case changed == nil:
			return fmt.Errorf("host %s was not started by the harness", h.Name)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("host %s: boot %d: %w", h.Name, n, ctx.Err())
		}
	}
}

// Reboot reboots the host as a machine reboots: every process of the
// host ends at once (SSH sessions drop, units' processes die), then it
// boots again with a new boot ID, fresh /run and /tmp, what its update
// tool staged, and the units its targets want started (kubelet.path, an
// enabled kubelet.service...). It returns once they were started, with
// what starting them said. A host whose namespaces someone else made
// (Started) cannot go down: its running units are stopped and its wanted
// units started again, as before there were real reboots.
func (h *Host) Reboot(ctx context.Context) error {
	h.mu.Lock()
	started, pid, boots := h.changed != nil, h.initPID, h.boots
	h.mu.Unlock()
	if !started {
		if out, err := h.Exec(ctx, "systemctl", "__reboot"); err != nil {
			return fmt.Errorf("reboot %s: %w: %s", h.Name, err, out)
		}
		return nil
	}
	if pid > 0 {
		if err := os.WriteFile(filepath.Join(h.dir, worldDir, osstate.RebootName), []byte("harness\n"), 0o644); err != nil {
			return fmt.Errorf("reboot %s: %w", h.Name, err)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := h.WaitBoot(ctx, boots+1); err != nil {
		return fmt.Errorf("reboot %s: %w", h.Name, err)
	}
	return nil
}

// start boots the host the first time (Start): its units are not
// started, as a fresh host has none (but zincati.service, Options.Zincati).
func (h *Host) start(ctx context.Context) error {
	addr := net.JoinHostPort(h.Address, strconv.Itoa(h.Port))
	if l, err := net.Listen("tcp", addr); err != nil {
		return fmt.Errorf("host %s: %s is taken (another lab running?): %w", h.Name, addr, err)
	} else {
		l.Close()
	}
	h.mu.Lock()
	h.changed, h.stop, h.watched = make(chan struct{}), make(chan struct{}), make(chan struct{})
	h.mu.Unlock()
	exited, err := h.boot(ctx, time.Time{})
	if err != nil {
		close(h.watched)
		return err
	}
	// A fresh host has no units of its own, but for the OS's: Fedora
	// CoreOS starts zincati.service.
	if h.zincati {
		if err := h.startUnits(); err != nil {
			_ = h.cmd.Process.Kill()
			<-exited
			close(h.watched)
			return err
		}
	}
	h.mu.Lock()
	h.boots = 1
	h.notify()
	h.mu.Unlock()
	go h.watch(exited)
	return nil
}

// watch follows the host from boot to boot: when its init ends after a
// reboot was asked for, it boots it again; any other end (a crash, Close)
// leaves it down.
func (h *Host) watch(exited <-chan struct{}) {
	defer close(h.watched)
	for {
		<-exited
		down := time.Now()
		marker := filepath.Join(h.dir, worldDir, osstate.RebootName)
		h.mu.Lock()
		// unshare ends after its child, unless it was killed (Close):
		// then the init may still be taking its namespace down.
		waitGone(h.initPID)
		h.initPID, h.cmd = 0, nil
		rebooting := osstate.Exists(marker)
		if h.closing || !rebooting {
			if h.ended == nil {
				h.ended = ErrHostDown
				if !h.closing {
					out, _ := os.ReadFile(filepath.Join(h.dir, "sshd.log"))
					h.ended = fmt.Errorf("%w: its init ended without a reboot: %s", ErrHostDown, strings.TrimSpace(string(out)))
				}
			}
			h.notify()
			h.mu.Unlock()
			return
		}
		h.notify()
		h.mu.Unlock()
		_ = os.Remove(marker)
		select {
		case <-h.stop:
			continue // exited is closed: the next round sees closing
		case <-time.After(rebootDowntime):
		}
		var err error
		exited, err = h.boot(context.Background(), down)
		if err == nil {
			err = h.startUnits()
		}
		h.mu.Lock()
		if exited == nil {
			h.ended = fmt.Errorf("%w: boot failed: %w", ErrHostDown, err)
			h.notify()
			h.mu.Unlock()
			return
		}
		h.boots++
		h.bootErr = err
		h.notify()
		h.mu.Unlock()
	}
}

// startUnits starts what the host's targets want, as systemd does at
// boot.
func (h *Host) startUnits() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := h.Exec(ctx, "systemctl", "__boot"); err != nil {
		return fmt.Errorf("boot %s: %w: %s", h.Name, err, out)
	}
	return nil
}

// boot prepares this boot's files (a new boot ID, what the update tool
// staged: osBoot) and starts the host's namespaces with sshd as their
// init, returning once sshd answers, with a channel closed when the
// host's init has ended. down is when the host went down (zero at the
// first boot).
func (h *Host) boot(ctx context.Context, down time.Time) (<-chan struct{}, error) {
	if err := os.WriteFile(filepath.Join(h.dir, bootDir, "boot_id"), []byte(newBootID()+"\n"), 0o444); err != nil {
		return nil, err
	}
	if err := h.osBoot(down); err != nil {
		return nil, fmt.Errorf("host %s: %w", h.Name, err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, worldDir, osstate.RebootableName), nil, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("unshare", "--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private",
		"--kill-child=SIGKILL", "sh", "-c", setup, "sh", h.dir)
	logf, err := os.Create(filepath.Join(h.dir, "sshd.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return nil, fmt.Errorf("host %s: %w (closed)", h.Name, ErrHostDown)
	}
	if err := cmd.Start(); err != nil {
		h.mu.Unlock()
		return nil, fmt.Errorf("host %s: start: %w", h.Name, err)
	}
	h.cmd = cmd
	h.mu.Unlock()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	pid, err := h.awaitSSHD(ctx, cmd, exited)
	if err != nil {
		_ = cmd.Process.Kill()
		<-exited
		h.mu.Lock()
		h.cmd = nil
		h.mu.Unlock()
		return nil, err
	}
	h.mu.Lock()
	h.initPID = pid
	h.mu.Unlock()
	return exited, nil
}

// awaitSSHD waits until the host's sshd answers and returns its PID (the
// namespace's first process, unshare's only child).
func (h *Host) awaitSSHD(ctx context.Context, cmd *exec.Cmd, exited <-chan struct{}) (int, error) {
	addr := net.JoinHostPort(h.Address, strconv.Itoa(h.Port))
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(filepath.Join(h.dir, "sshd.log"))
			return 0, fmt.Errorf("host %s: sshd exited: %s", h.Name, strings.TrimSpace(string(out)))
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("host %s: sshd on %s did not start", h.Name, addr)
		}
	}
	for tries := 0; ; tries++ {
		children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		if err != nil {
			return 0, err
		}
		if f := strings.Fields(string(children)); len(f) > 0 {
			return strconv.Atoi(f[0])
		}
		if tries == 50 {
			return 0, fmt.Errorf("host %s: %s answers, but not this host's sshd (another lab on the same addresses?)", h.Name, addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitGone waits (up to 15 s) until process pid has ended: gone, or a
// zombie, whose namespace's processes, files and sockets are gone.
func waitGone(pid int) {
	if pid <= 0 {
		return
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			return
		}
	}
}

// newBootID is a random (version 4) UUID, as the kernel makes a boot ID.
func newBootID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Close stops every host, rebooting ones too: killing a host's sshd (PID
// 1 of its namespace) kills everything it started, and its mounts go
// with the namespace. It returns once every host's processes have ended.
func (l *Lab) Close() error {
	for _, h := range l.Hosts {
		h.mu.Lock()
		if !h.closing && h.stop != nil {
			close(h.stop)
		}
		h.closing = true
		if h.initPID > 0 {
			_ = syscall.Kill(h.initPID, syscall.SIGKILL)
		}
		if h.cmd != nil && h.cmd.Process != nil {
			_ = h.cmd.Process.Kill()
		}
		h.mu.Unlock()
	}
	var errs []error
	for _, h := range l.Hosts {
		if h.watched == nil {
			// Started by someone else (Started): its init is theirs.
			if pid := h.pid(); pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				waitGone(pid)
			}
			continue
		}
		select {
		case <-h.watched:
		case <-time.After(30 * time.Second):
			errs = append(errs, fmt.Errorf("host %s did not stop within 30s", h.Name))
		}
	}
	return errors.Join(errs...)
}
