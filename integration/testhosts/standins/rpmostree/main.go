// Command rpm-ostree is the test world's stand-in for Fedora CoreOS's
// rpm-ostree, installed at /usr/bin/rpm-ostree on a test host of the
// fedora-coreos family (integration/testhosts). It answers `status` and
// `upgrade` (alias `update`) from the host's OS state (osstate): the
// deployment booted, one staged for the next boot, the rollback, and the
// version the host's update server offers. It stages; the host's next
// boot (systemctl reboot) runs what it staged.
//
//	rpm-ostree status [-v] [-b] [--json] [--pending-exit-77]
//	rpm-ostree upgrade [--check|--preview] [--unchanged-exit-77] [-r]
//	                   [--bypass-driver] [--allow-downgrade] [-C] [--os=OSNAME]
//
// As the real one: `upgrade` stages the offered version when it is
// newer than the default deployment (the staged one, else the booted),
// printing "Staging deployment... done"; with nothing newer it prints
// "No upgrade available." and exits 0, or 77 with --unchanged-exit-77;
// an older offer is refused without --allow-downgrade. --check and
// --preview only report ("AvailableUpdate:" and the version, or "No
// updates available." and exit 77). `status --json` prints the
// deployments as the real one does (json-glib's layout, `"key" : value`),
// staged first, with version, checksum, id, osname, origin, timestamp,
// booted and, on a staged one, "staged" : true. Errors are "error: ..."
// on stderr, exit 1: unknown options ("Unknown option --foo"), unknown
// commands, arguments a command does not take, and `upgrade` by anyone
// but root (the real one asks polkit, which refuses a remote non-root
// session). Commands it does not implement (rebase, rollback, deploy,
// kargs, install, cleanup, ...) are refused naming the stand-in.
//
// While an update driver is registered and its unit is active (the
// binary installed as zincati registers itself when zincati.service
// starts), `upgrade` is refused as the real one refuses it, unless
// --bypass-driver (driver.go). No package layering, no container
// origins, no signatures.
//
// It is test infrastructure only.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

func main() {
	a := &app{stdout: os.Stdout, stderr: os.Stderr, euid: os.Geteuid(), now: time.Now, root: os.Getenv("KEDGE_LAB_OS_ROOT")}
	if filepath.Base(os.Args[0]) == "zincati" {
		os.Exit(a.zincati(os.Args[1:]))
	}
	os.Exit(a.run(os.Args[1:]))
}

// app is one run, with what it reads of the world injected.
type app struct {
	stdout, stderr io.Writer
	euid           int
	now            func() time.Time
	// root prefixes every path (the stand-in's own tests).
	root string
	// reboot asks for the host's reboot (upgrade --reboot).
	reboot func() error
	// active says whether a systemd unit is active (systemctl is-active).
	active func(unit string) bool
}

// Exit statuses.
const (
	exitError     = 1
	exitUnchanged = 77
)

func (a *app) fail(format string, args ...any) int {
	fmt.Fprintf(a.stderr, "error: "+format+"\n", args...)
	return exitError
}

// unimplemented are real commands the stand-in does not have.
var unimplemented = map[string]bool{
	"apply-live": true, "cancel": true, "cleanup": true, "compose": true, "db": true, "deploy": true,
	"initramfs": true, "initramfs-etc": true, "install": true, "kargs": true, "override": true, "rebase": true,
	"refresh-md": true, "reload": true, "reset": true, "rollback": true, "uninstall": true, "usroverlay": true,
	"ex": true, "search": true, "finalize-deployment": true,
}

func (a *app) run(args []string) int {
	var cmd string
	var rest []string
	for i, arg := range args {
		switch {
		case arg == "--version":
			fmt.Fprintln(a.stdout, "rpm-ostree:\n Version: '2024.6'\n Features:\n  - rust\n  - compose")
			return 0
		case arg == "-q" || arg == "--quiet":
		case len(arg) > 1 && arg[0] == '-':
			return a.fail("Unknown option %s", arg)
		default:
			cmd, rest = arg, args[i+1:]
		}
		if cmd != "" {
			break
		}
	}
	switch {
	case cmd == "":
		fmt.Fprintln(a.stderr, "Usage:\n  rpm-ostree [OPTION…] COMMAND\n\nBuiltin Commands:\n  status    Get the version of the booted system\n  upgrade   Perform a system upgrade")
		return a.fail("No command specified")
	case cmd == "status":
		return a.status(rest)
	case cmd == "upgrade" || cmd == "update":
		return a.upgrade(rest)
	case unimplemented[cmd]:
		return a.fail("the test world's rpm-ostree does not implement %q", cmd)
	}
	return a.fail("Unknown command '%s'", cmd)
}

// flags parses a command's options as GLib's option parser does: known
// long options (--name, --name=VALUE for those with a value) and short
// ones; anything else starting with - is unknown. Operands are refused.
func (a *app) flags(args []string, bools map[string]string, values map[string]string) (map[string]string, int) {
	set := map[string]string{}
	for _, arg := range args {
		name, value, hasValue := arg, "", false
		if len(arg) > 2 && arg[:2] == "--" {
			for i := range arg {
				if arg[i] == '=' {
					name, value, hasValue = arg[:i], arg[i+1:], true
					break
				}
			}
		}
		switch {
		case bools[name] != "" && !hasValue:
			set[bools[name]] = "true"
		case values[name] != "" && hasValue:
			set[values[name]] = value
		case values[name] != "":
			return nil, a.fail("Missing argument for %s", name)
		case len(arg) > 1 && arg[0] == '-':
			return nil, a.fail("Unknown option %s", arg)
		default:
			return nil, a.fail("Too many arguments passed")
		}
	}
	return set, 0
}
