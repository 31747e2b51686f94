package testhosts

import (
	"fmt"
	"strings"
)

// A host inside namespaces someone else made: integration/realnode makes a
// real node (its own mount and network namespaces, a real kubelet and
// containerd) an SSH test host too. Prepare writes the host's files as
// Start would (Options.Addresses gives it the node's address); the maker
// of the namespaces runs InsideScript there, as root, and tells the host
// its sshd with Started. From then on the host is like any other: Kedge
// logs in as User and becomes root with sudo, and its stand-ins
// (systemctl, docker, podman) run the units Kedge writes.

// InsideScript makes the host's files visible inside a mount namespace
// whose /etc and /var/lib are already private (a real node's overlays)
// and becomes sshd, listening on the host's address. $1 is the host's
// directory (Dir). Unlike Start's hosts it does not cover /var/log, /run,
// /root or /tmp, and makes no PID namespace: those are the namespace
// maker's to give (a real node's /var/log and /run are private already;
// its /root and /tmp are the machine's, where the harness keeps the files
// it hands the node).
func (h *Host) InsideScript() string {
	return `set -e
H="$1"
cp -a "$H/etc-upper/." /etc/
cp -a "$H/varlib-upper/." /var/lib/
mount --bind "$H/home" /home
mount --bind "$H/bin" ` + StandInDir + `
mkdir -p /run/sshd
exec ` + sshdPath + ` -D -e -f /etc/ssh/kedge_sshd_config
`
}

// Dir is the host's directory on the machine: its files as Prepare wrote
// them (InsideScript's $1).
func (h *Host) Dir() string { return h.dir }

// Started tells a host made with Prepare the PID (in the machine's PID
// namespace) of its sshd, which InsideScript became: ReadFile, WriteFile,
// Exec and Close reach the host through it.
func (h *Host) Started(pid int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.initPID = pid
}

// SetImages replaces the running host's local image store with imgs: for
// a host whose images are not LabImages (a real node's kubelet images are
// real kubelets, not the simulator).
func (h *Host) SetImages(imgs ...Image) error {
	var b strings.Builder
	b.WriteString("# The container stand-in's local images: REFERENCE DIGEST PROGRAM [ARGS...]\n")
	for _, im := range imgs {
		if im.Ref == "" || len(im.Entrypoint) == 0 {
			return fmt.Errorf("image %q: a reference and an entrypoint are needed", im.Ref)
		}
		b.WriteString(im.line())
	}
	return h.WriteFile(ImageStore, []byte(b.String()), 0o644)
}
