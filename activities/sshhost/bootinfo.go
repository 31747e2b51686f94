package sshhost

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
)

// bootInfoCommand prints the boot ID, os-release and the reboot flag, in
// sections: what BootInfo reads in one round trip.
const bootInfoCommand = `cat /proc/sys/kernel/random/boot_id && echo '--- os-release' && cat /etc/os-release && echo '--- kernel' && cat /proc/sys/kernel/osrelease && echo '--- time' && date -u +%Y-%m-%dT%H:%M:%SZ && echo '--- reboot' && if [ -e /run/reboot-required ]; then echo required; fi`

// BootInfo reads what the host booted (host.boot-info).
func (a *Activities) BootInfo(ctx context.Context, in host.BootInfoInput) (host.BootInfoResult, error) {
	out, err := a.exec(ctx, in.Target, execSpec{command: bootInfoCommand, limit: 64 << 10})
	if err != nil {
		return host.BootInfoResult{}, toTemporal(err)
	}
	if out.ExitCode != 0 {
		return host.BootInfoResult{}, toTemporal(&typedError{typ: errtype.CommandFailed,
			msg: fmt.Sprintf("boot info on %s: exit %d%s", in.Target.Name(), out.ExitCode, tailLine(out.Stderr))})
	}
	res, err := parseBootInfo(out.Stdout)
	if err != nil {
		return res, toTemporal(&typedError{typ: errtype.CommandFailed, msg: fmt.Sprintf("boot info on %s: %v", in.Target.Name(), err)})
	}
	return res, nil
}

// parseBootInfo reads bootInfoCommand's output. os-release is read as
// its specification says (KEY=value, the value shell-quoted), never run.
func parseBootInfo(s string) (host.BootInfoResult, error) {
	var res host.BootInfoResult
	id, rest, ok := strings.Cut(s, "--- os-release\n")
	osRelease, rest, ok2 := strings.Cut(rest, "--- kernel\n")
	kernel, rest, ok3 := strings.Cut(rest, "--- time\n")
	now, reboot, ok4 := strings.Cut(rest, "--- reboot\n")
	if !ok || !ok2 || !ok3 || !ok4 {
		return res, fmt.Errorf("unexpected output %.200q", s)
	}
	res.Kernel, res.HostTime = strings.TrimSpace(kernel), strings.TrimSpace(now)
	res.BootID = strings.TrimSpace(id)
	if len(res.BootID) != 36 || strings.Count(res.BootID, "-") != 4 {
		return res, fmt.Errorf("boot ID %.60q is no UUID", res.BootID)
	}
	rel := osReleaseFields(osRelease)
	res.OS, res.Version = rel["ID"], rel["VERSION_ID"]
	res.RebootRequired = strings.TrimSpace(reboot) == "required"
	like := strings.Fields(rel["ID_LIKE"])
	switch {
	case rel["VARIANT_ID"] == "coreos" || res.OS == "fedora-coreos":
		res.Updater = host.UpdaterRPMOSTree
		res.Booted = cmp.Or(rel["OSTREE_VERSION"], firstWord(rel["VERSION"]))
	case res.OS == "flatcar":
		res.Updater, res.Booted = host.UpdaterUpdateEngine, res.Version
	case res.OS == "debian" || res.OS == "ubuntu" || slices.Contains(like, "debian") || slices.Contains(like, "ubuntu"):
		res.Updater, res.Booted = host.UpdaterApt, res.Kernel
	default:
		res.Booted = res.Version
	}
	return res, nil
}

// osReleaseFields reads os-release as its specification says: KEY=value
// lines, the value shell-quoted; it is never run.
func osReleaseFields(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		} else if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			v = v[1 : len(v)-1]
		}
		out[k] = v
	}
	return out
}

func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}
