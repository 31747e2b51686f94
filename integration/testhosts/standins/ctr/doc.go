// Command ctr is the test world's stand-in for containerd's ctr, installed
// on the simulated hosts (not on real-kubelet nodes, which run a real
// containerd and keep the machine's /usr/bin/ctr). It answers the few
// commands Kedge runs against the containerd the kubelet uses for pods, as
// root through sudo:
//
//	ctr -a /run/containerd/containerd.sock -n k8s.io images ls -q
//	ctr -a /run/containerd/containerd.sock -n k8s.io images pull REF
//
// and refuses everything else, so a command that works against it has a
// fair chance against the real ctr.
//
// # Command line
//
// The real ctr parses its command line with urfave/cli (Go's flag package
// underneath), and so does the stand-in: a flag is -name or --name, its
// value =VALUE or the next word, and flags end at the first word that is
// not one (flags after a command's arguments are not flags here; real
// ctr 1.x moved them forward, 2.x takes them as arguments).
//
// Global flags, before the command: --address/-a (default
// /run/containerd/containerd.sock, or $CONTAINERD_ADDRESS),
// --namespace/-n (default "default", or $CONTAINERD_NAMESPACE), and
// --timeout, --connect-timeout (durations) and --debug, which are
// accepted and do nothing.
//
// Commands: images (image, i) with
//
//   - ls (list) [--quiet/-q]: with -q one reference a line, else a table
//     REF TYPE DIGEST SIZE PLATFORMS LABELS. Filters are refused.
//   - pull [--platform P]... [--all-platforms] REF: exactly one REF (real
//     ctr ignores any further words; the stand-in refuses them). P must
//     name linux/amd64 (linux/amd64, amd64, linux/x86_64, x86_64): the
//     images are amd64 only.
//
// Real ctr's other commands, subcommands and flags (--help, --version,
// pull's -k, -u, --plain-http...) are refused with a message saying the
// stand-in lacks them; words real ctr does not know either are refused as
// it refuses them: "Incorrect Usage: flag provided but not defined: -x"
// on stdout and "ctr: flag provided but not defined: -x" on stderr, exit 1;
// "No help topic for 'x'", exit 3, for an unknown command.
//
// # The daemon
//
// There is no daemon. The stand-in acts as if containerd listens on
// /run/containerd/containerd.sock (also unix:///run/...), a socket only
// root may open: not root, it fails as ctr does there ("ctr: failed to
// dial ...: connect: permission denied"); at any other address it fails as
// ctr does when no socket is there ("... dial unix:///PATH: timeout",
// without the ten seconds real ctr waits first). Exit 1.
//
// # Images
//
// The images of containerd's k8s.io namespace are the lines of the file
// /var/lib/kedge-lab/cri-image-store, written by the test harness
// (integration/testhosts, images.go) in the docker stand-in's format:
//
//	REFERENCE DIGEST PROGRAM [ARGS...]
//
// PROGRAM is not used here (nothing runs containerd's images in the test
// world). Every other namespace is empty. The store is not docker's
// (/var/lib/kedge-lab/image-store), as containerd's images are not
// docker's on a real host.
//
// There is no registry. `images pull REF` first parses REF as ctr does (a
// host in the first component, a tag or digest: "busybox" fails with
// "object required", "busybox:1" with "invalid port"); an image in the
// namespace's store, by NAME:TAG, NAME@DIGEST or NAME:TAG@DIGEST, pulls
// with ctr's progress output and a line "TIME ctr REF" appended to
// /var/lib/kedge-lab/pulls (the docker stand-in's pull log); anything else
// fails as a registry host that cannot be resolved makes ctr fail ("ctr:
// failed to resolve reference ...: dial tcp: lookup HOST: no such host").
// A pull adds nothing to the store.
//
// KEDGE_LAB_CRI_IMAGE_STORE moves the store file (and the pull log,
// beside it), for the stand-in's own tests.
//
// It is test infrastructure only and must never be installed on a real
// host.
package main
