// Command update_engine_client is the test world's stand-in for
// Flatcar's update_engine_client, installed at /usr/bin/update_engine_client
// on a test host of the flatcar family (integration/testhosts). There is
// no update_engine daemon: the stand-in keeps the daemon's state itself,
// in /run (gone at a reboot, as the daemon's memory is) and, for an
// update written to the passive partition, in the host's OS state
// (osstate), which the host's next boot applies.
//
// Flags are gflags': one or two dashes, -flag, -flag=true|false, -noflag;
// an unknown one is refused ("ERROR: unknown command line flag 'foo'",
// exit 1); operands are ignored, as gflags leaves them.
//
//	-status            prints the real lines on stdout:
//	                     LAST_CHECKED_TIME=1715000000
//	                     PROGRESS=0.000000
//	                     CURRENT_OP=UPDATE_STATUS_IDLE
//	                     NEW_VERSION=0.0.0
//	                     NEW_SIZE=0
//	-check_for_update  starts a check and returns: CURRENT_OP then goes
//	                   UPDATE_STATUS_CHECKING_FOR_UPDATE, (an update offered)
//	                   UPDATE_STATUS_UPDATE_AVAILABLE, UPDATE_STATUS_DOWNLOADING
//	                   (PROGRESS rising), UPDATE_STATUS_VERIFYING,
//	                   UPDATE_STATUS_FINALIZING, UPDATE_STATUS_UPDATED_NEED_REBOOT
//	                   with NEW_VERSION and NEW_SIZE, over about 1.7 s (a
//	                   client polls -status); with nothing offered, back to
//	                   UPDATE_STATUS_IDLE after the check.
//	-update            the same, waiting (polling every 0.2 s, the real one 5 s)
//	                   until it is done: exit 0.
//	-reset_status      back to UPDATE_STATUS_IDLE, the written update dropped.
//
// Log lines go to stderr in glog's format, as the real client's. The
// OS version offered is osstate's offer; any version other than the
// booted one is an update (the update server decides). A reboot before
// UPDATED_NEED_REBOOT boots the old version. After a reboot into the
// update, -status is UPDATE_STATUS_IDLE again and /etc/os-release names
// the new version. -check_for_update, -update and -reset_status need
// root (the daemon's D-Bus policy is assumed to refuse other users; the
// client then fails its CHECK and aborts, exit 134); -status does not.
// -watch_for_updates is refused naming the stand-in.
//
// It is test infrastructure only.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	a := &app{stdout: os.Stdout, stderr: os.Stderr, euid: os.Geteuid(), now: time.Now, sleep: time.Sleep,
		root: os.Getenv("KEDGE_LAB_OS_ROOT"), pid: os.Getpid()}
	os.Exit(a.run(os.Args[1:]))
}

// app is one run, with what it reads of the world injected.
type app struct {
	stdout, stderr io.Writer
	euid           int
	now            func() time.Time
	sleep          func(time.Duration)
	// root prefixes every path (the stand-in's own tests).
	root string
	pid  int
}

// flagNames are the client's flags.
var flagNames = []string{"check_for_update", "status", "reset_status", "update", "watch_for_updates"}

// parseFlags reads gflags-style boolean flags.
func parseFlags(args []string) (map[string]bool, string) {
	set := map[string]bool{}
	for _, arg := range args {
		if arg == "--" {
			break
		}
		if len(arg) < 2 || arg[0] != '-' {
			continue // an operand: gflags leaves it to the program, which ignores it
		}
		name := strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-")
		name, value, hasValue := strings.Cut(name, "=")
		on := true
		if hasValue {
			switch value {
			case "true", "1", "yes", "t", "y":
			case "false", "0", "no", "f", "n":
				on = false
			default:
				return nil, fmt.Sprintf("ERROR: illegal value '%s' specified for bool flag '%s'", value, name)
			}
		}
		known := func(n string) bool {
			for _, f := range flagNames {
				if f == n {
					return true
				}
			}
			return false
		}
		switch {
		case known(name):
			set[name] = on
		case !hasValue && strings.HasPrefix(name, "no") && known(name[2:]):
			set[name[2:]] = false
		default:
			return nil, fmt.Sprintf("ERROR: unknown command line flag '%s'", name)
		}
	}
	return set, ""
}

// logf writes a glog line (severity I, W, E or F) to stderr.
func (a *app) logf(severity byte, line int, format string, args ...any) {
	t := a.now()
	fmt.Fprintf(a.stderr, "%c%s %5d update_engine_client.cc:%d] %s\n", severity, t.Format("0102 15:04:05.000000"), a.pid, line, fmt.Sprintf(format, args...))
}

func (a *app) run(args []string) int {
	set, bad := parseFlags(args)
	if bad != "" {
		fmt.Fprintln(a.stderr, bad)
		return 1
	}
	needsRoot := set["reset_status"] || set["check_for_update"] || set["update"]
	if needsRoot && !set["status"] || set["reset_status"] {
		if a.euid != 0 {
			a.logf('F', 171, "Check failed: rc == TRUE (0 vs. 1) Error checking for update: Rejected send message, 1 matched rules; type=\"method_call\", interface=\"com.coreos.update1.Manager\" (uid=%d) destination=\"com.coreos.update1\"", a.euid)
			fmt.Fprintln(a.stderr, "*** Check failure stack trace: ***")
			return 134
		}
	}
	switch {
	case set["reset_status"]:
		a.logf('I', 219, "Setting Update Engine status to idle ...")
		if err := a.resetStatus(); err != nil {
			a.logf('E', 221, "ResetStatus failed.")
			return 1
		}
		a.logf('I', 225, "ResetStatus succeeded; to undo partition table changes run:\n(D=$(rootdev -d) P=$(rootdev -s); cgpt p -i$(($(echo ${P#$D} | sed 's/^[^0-9]*//')-1)) $D;)")
		return 0
	case set["status"]:
		a.logf('I', 233, "Querying Update Engine status...")
		if _, err := a.printStatus(); err != nil {
			a.logf('F', 235, "GetStatus failed.")
			return 1
		}
		return 0
	case set["check_for_update"] || set["update"]:
		a.logf('I', 242, "Initiating update check and install.")
		if err := a.attempt(); err != nil {
			a.logf('F', 243, "Check failed: CheckForUpdates() Update check/initiate update failed. %v", err)
			return 134
		}
		if set["update"] {
			a.logf('I', 247, "Waiting for update to complete.")
			return a.waitUpdate()
		}
		return 0
	case set["watch_for_updates"]:
		fmt.Fprintln(a.stderr, "update_engine_client stand-in: -watch_for_updates is not implemented")
		return 1
	}
	a.logf('I', 262, "Done.")
	return 0
}

// waitUpdate polls the status until the update is done, as -update does.
func (a *app) waitUpdate() int {
	for {
		a.sleep(200 * time.Millisecond)
		op, err := a.printStatus()
		if err != nil {
			a.logf('E', 189, "Update failed.")
			return 1
		}
		switch op {
		case "UPDATE_STATUS_IDLE":
			a.logf('I', 193, "No update available")
			return 0
		case "UPDATE_STATUS_UPDATED_NEED_REBOOT":
			a.logf('I', 197, "Update succeeded -- reboot needed.")
			return 0
		}
	}
}
