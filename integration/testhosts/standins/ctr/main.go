package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

func main() {
	a := &app{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, euid: os.Geteuid(), now: time.Now}
	os.Exit(a.run(os.Args[1:]))
}

// app is one run of the stand-in, with what it reads of the world
// injected, so its tests run it in-process.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	euid           int
	now            func() time.Time

	address, namespace string
}

// The containerd socket, the only address where the stand-in's containerd
// answers.
const socket = "/run/containerd/containerd.sock"

// The exit statuses of real ctr: 1 for an error or a usage mistake, 3 for
// an unknown command (urfave/cli's "No help topic").
const (
	exitError          = 1
	exitUnknownCommand = 3
)

// The real commands and image subcommands the stand-in lacks: refused as
// missing, not as unknown.
var (
	otherCommands = []string{"plugins", "plugin", "version", "containers", "c", "container", "content",
		"events", "event", "leases", "namespaces", "namespace", "ns", "pprof", "run", "snapshots",
		"snapshot", "tasks", "t", "task", "install", "oci", "shim", "sandboxes", "sandbox", "sb",
		"deprecations", "info", "help", "h"}
	otherImageCommands = []string{"check", "export", "import", "mount", "unmount", "push", "delete",
		"del", "remove", "rm", "tag", "label", "convert", "inspect", "usage", "prune", "help", "h"}
)

func (a *app) run(args []string) int {
	g, rest, err := parseFlags(globalFlags, args)
	if err != nil {
		return a.usageError("", err)
	}
	a.address = g.last("address", a.envOr("CONTAINERD_ADDRESS", socket))
	a.namespace = g.last("namespace", a.envOr("CONTAINERD_NAMESPACE", "default"))
	if len(rest) == 0 {
		fmt.Fprint(a.stdout, appHelp)
		return 0
	}
	switch cmd := rest[0]; {
	case cmd == "images" || cmd == "image" || cmd == "i":
		return a.images(rest[1:])
	case slices.Contains(otherCommands, cmd):
		return a.fail("the Kedge test world's ctr stand-in has no %q command (it has images ls and images pull)", cmd)
	default:
		fmt.Fprintf(a.stderr, "No help topic for '%s'\n", cmd)
		return exitUnknownCommand
	}
}

func (a *app) images(args []string) int {
	_, rest, err := parseFlags(imagesFlags, args)
	if err != nil {
		return a.usageError("images", err)
	}
	if len(rest) == 0 {
		fmt.Fprint(a.stdout, imagesHelp)
		return 0
	}
	switch sub := rest[0]; {
	case sub == "ls" || sub == "list":
		return a.list(rest[1:])
	case sub == "pull":
		return a.pull(rest[1:])
	case slices.Contains(otherImageCommands, sub):
		return a.fail("the Kedge test world's ctr stand-in has no \"images %s\" command (it has images ls and images pull)", sub)
	default:
		fmt.Fprintf(a.stderr, "No help topic for '%s'\n", sub)
		return exitUnknownCommand
	}
}

// usageError reports a command-line mistake as urfave/cli does: the
// message and the command's help on stdout ("Incorrect Usage." for the
// application's flags, "Incorrect Usage:" for a command's), the message
// again on stderr. A flag the stand-in lacks is reported on stderr only.
func (a *app) usageError(cmd string, err error) int {
	if _, ok := err.(errUnsupported); ok {
		return a.fail("%v", err)
	}
	switch cmd {
	case "":
		fmt.Fprintf(a.stdout, "Incorrect Usage. %v\n\n%s", err, appHelp)
	case "images":
		fmt.Fprintf(a.stdout, "Incorrect Usage: %v\n\n%s", err, imagesHelp)
	case "ls":
		fmt.Fprintf(a.stdout, "Incorrect Usage: %v\n\n%s", err, lsHelp)
	case "pull":
		fmt.Fprintf(a.stdout, "Incorrect Usage: %v\n\n%s", err, pullHelp)
	}
	return a.fail("%v", err)
}

// fail prints "ctr: MESSAGE" on stderr, as ctr prints every error.
func (a *app) fail(format string, args ...any) int {
	fmt.Fprintf(a.stderr, "ctr: "+format+"\n", args...)
	return exitError
}

// dial stands for connecting to containerd: only root may open its socket
// (srw-rw---- root root), and there is no other.
func (a *app) dial() error {
	path := strings.TrimPrefix(a.address, "unix://")
	if path != socket {
		// ctr retries a socket that is not there until its connect
		// timeout (10 s), then says so; the stand-in does not wait.
		return fmt.Errorf("failed to dial %q: context deadline exceeded: connection error: desc = \"transport: error while dialing: dial unix://%s: timeout\"", a.address, path)
	}
	if a.euid != 0 {
		return fmt.Errorf("failed to dial %q: connection error: desc = \"transport: error while dialing: dial unix %s: connect: permission denied\"", a.address, path)
	}
	return nil
}

func (a *app) envOr(name, def string) string {
	if v := a.getenv(name); v != "" {
		return v
	}
	return def
}

// The help texts, of what the stand-in supports, in ctr's layout.
const (
	appHelp = `NAME:
   ctr - containerd CLI (the Kedge test world's stand-in)

USAGE:
   ctr [global options] command [command options] [arguments...]

COMMANDS:
   images, image, i  manage images

GLOBAL OPTIONS:
   --debug                      enable debug output in logs
   --address value, -a value    address for containerd's GRPC server (default: "/run/containerd/containerd.sock") [$CONTAINERD_ADDRESS]
   --timeout value              total timeout for ctr commands (default: 0s)
   --connect-timeout value      timeout for connecting to containerd (default: 0s)
   --namespace value, -n value  namespace to use with commands (default: "default") [$CONTAINERD_NAMESPACE]
`
	imagesHelp = `NAME:
   ctr images - manage images

USAGE:
   ctr images command [command options] [arguments...]

COMMANDS:
   list, ls  list images known to containerd
   pull      pull an image from a remote
`
	lsHelp = `NAME:
   ctr images list - list images known to containerd

USAGE:
   ctr images list [command options]

OPTIONS:
   --quiet, -q  print only the image refs
`
	pullHelp = `NAME:
   ctr images pull - pull an image from a remote

USAGE:
   ctr images pull [command options] <ref>

OPTIONS:
   --platform value  Pull content from a specific platform
   --all-platforms   pull content and metadata from all platforms
`
)
