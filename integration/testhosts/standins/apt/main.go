// Command apt is the test world's stand-in for Debian's apt-get and
// apt-mark (by the name it is run as), installed at /usr/bin/apt-get and
// /usr/bin/apt-mark on a test host of the debian family
// (integration/testhosts). Its package database is its own, on the
// host's disk (osstate: StateDir/dpkg-status, in dpkg's status format,
// holds included; StateDir/apt-lists.json, what `apt-get update` last
// found), never the machine's; the host's update server offers what the
// test says (osstate's offer).
//
//	apt-get [options] update
//	apt-get [options] upgrade | dist-upgrade | full-upgrade
//	apt-mark hold|unhold PKG...
//	apt-mark showhold
//
// Options, anywhere on the line as apt's parser takes them: -y/--yes/
// --assume-yes, -q/-qq/-q=N/--quiet, -s/--simulate (--just-print,
// --dry-run, --recon, --no-act), --with-new-pkgs, --no-install-recommends,
// -o KEY=VALUE/-oKEY=VALUE/--option KEY=VALUE (APT::Get::Assume-Yes,
// APT::Get::With-New-Pkgs, APT::Get::Upgrade-Allow-New, quiet, and any
// other key accepted and ignored, as apt accepts unknown keys). Anything
// else is refused as apt refuses it ("E: Command line option 'z' [from
// -z] is not understood in combination with the other options.", "E:
// Invalid operation foo", exit 100), and real operations the stand-in
// lacks (install, remove, ...) are refused naming it.
//
// As the real apt-get: only `apt-get update` makes newer versions known;
// `upgrade` never installs a package that is not installed, so an
// upgrade needing one (a new kernel ABI: linux-image-amd64 depending on
// a new linux-image-RELEASE) is kept back unless --with-new-pkgs, or
// dist-upgrade; held packages (apt-mark hold) are always kept back.
// Without -y (or -qq, which implies it) it asks "Do you want to
// continue? [Y/n]" and reads stdin: no answer (no terminal, stdin at its
// end) or "n" prints "Abort." and exits 1. Both need root but for
// --simulate (the real ones' lock errors, exit 100). Installing a kernel
// package (linux-image-RELEASE) writes /run/reboot-required and adds the
// package to /run/reboot-required.pkgs, as Ubuntu's and Debian's hooks
// do; the host's next boot runs the newest installed kernel
// (/proc/sys/kernel/osrelease says which; uname -r stays the machine's).
// dpkg's own lines ("Unpacking curl (7.88.1-10+deb12u6) over
// (7.88.1-10+deb12u5) ...", "Setting up ...") show what changed.
//
// It is test infrastructure only.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func main() {
	a := &app{stdin: bufio.NewReader(os.Stdin), stdout: os.Stdout, stderr: os.Stderr, euid: os.Geteuid(), root: os.Getenv("KEDGE_LAB_OS_ROOT")}
	if filepath.Base(os.Args[0]) == "apt-mark" {
		os.Exit(a.mark(os.Args[1:]))
	}
	os.Exit(a.get(os.Args[1:]))
}

// app is one run, with what it reads of the world injected.
type app struct {
	stdin          *bufio.Reader
	stdout, stderr io.Writer
	euid           int
	// root prefixes every path (the stand-in's own tests).
	root string
}

// exitError is apt's status for an error.
const exitError = 100

func (a *app) fail(format string, args ...any) int {
	fmt.Fprintf(a.stderr, "E: "+format+"\n", args...)
	return exitError
}

func (a *app) path(dir, name string) string { return a.root + dir + "/" + name }
