package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"kedge.dev/kedge/integration/testhosts/standins/osstate"
)

// A reboot of the test host (systemctl reboot, reboot, shutdown -r now):
// as on a real machine the command returns at once, and a moment later
// the host goes down — here its init (sshd, PID 1 of the host's PID
// namespace) is told to end, and with it every process of the host. The
// harness (integration/testhosts), told by the marker in the world
// directory that this is a reboot and no crash, boots the host again.

// goDownAfter is how long after the command the host goes down.
const goDownAfter = 300 * time.Millisecond

// requestReboot asks for the reboot and returns.
func requestReboot() int {
	if os.Geteuid() != 0 {
		return fail("Failed to reboot system via logind: Interactive authentication required.")
	}
	// Only a host the harness boots again can go down: elsewhere PID 1
	// is not the host's sshd (a real node's namespaces, the machine).
	exe, _ := os.Readlink("/proc/1/exe")
	if !osstate.Exists(osstate.WorldDir+"/"+osstate.RebootableName) || !strings.HasSuffix(exe, "/sshd") {
		return fail("System has not been booted with systemd as init system (PID 1). Can't operate.\nFailed to connect to bus: Host is down")
	}
	if err := osstate.WriteFile(osstate.WorldDir+"/"+osstate.RebootName, []byte(time.Now().UTC().Format(time.RFC3339Nano)+"\n")); err != nil {
		return fail("Failed to reboot system: %v", err)
	}
	self, _ := os.Executable()
	down := exec.Command(self, "__go-down")
	// Detached, and holding none of the caller's output: the caller's
	// session ends now, before the host goes down.
	down.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := down.Start(); err != nil {
		return fail("Failed to reboot system: %v", err)
	}
	_ = down.Process.Release()
	return 0
}

// goDown takes the host down a moment after the request: sshd ends on
// SIGTERM (the one signal the namespace's init takes from inside), and
// the kernel ends every other process of the namespace with it.
func goDown() int {
	time.Sleep(goDownAfter)
	if err := syscall.Kill(1, syscall.SIGTERM); err != nil {
		return fail("reboot: %v", err)
	}
	return 0
}

// rebootCommand is reboot(8): an immediate reboot (--force and --no-wall
// change nothing here).
func rebootCommand(args []string) int {
	n := 0
	for _, a := range args {
		switch {
		case a == "-f" || a == "--force" || a == "--no-wall" || a == "-ff":
		case strings.HasPrefix(a, "--"):
			return fail("reboot: unrecognized option '%s'", a)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			return fail("reboot: invalid option -- '%s'", a[1:2])
		default:
			n++
		}
	}
	if n > 1 {
		return fail("Too many arguments.")
	}
	return requestReboot()
}

// shutdownCommand is shutdown(8) for a reboot now (-r now, -r +0); the
// stand-in schedules nothing and powers nothing off.
func shutdownCommand(args []string) int {
	rebootFlag, when := false, ""
	for _, a := range args {
		switch {
		case a == "-r" || a == "--reboot":
			rebootFlag = true
		case a == "--no-wall":
		case strings.HasPrefix(a, "--"):
			return fail("shutdown: unrecognized option '%s'", a)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			return fail("shutdown: invalid option -- '%s'", a[1:2])
		case when == "":
			when = a
		}
	}
	if !rebootFlag || when != "now" && when != "+0" {
		return fail("shutdown stand-in: only a reboot now (shutdown -r now) is supported")
	}
	return requestReboot()
}
