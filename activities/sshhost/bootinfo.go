package sshhost

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
)

// bootInfoCommand prints the boot ID, os-release and the reboot flag, in
// sections: what BootInfo reads in one round trip.
const bootInfoCommand = `cat /proc/sys/kernel/random/boot_id && echo '--- os-release' && cat /etc/os-release && echo '--- reboot' && if [ -e /run/reboot-required ]; then echo required; fi`

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
	osRelease, reboot, ok2 := strings.Cut(rest, "--- reboot\n")
	if !ok || !ok2 {
		return res, fmt.Errorf("unexpected output %.200q", s)
	}
	res.BootID = strings.TrimSpace(id)
	if len(res.BootID) != 36 || strings.Count(res.BootID, "-") != 4 {
		return res, fmt.Errorf("boot ID %.60q is no UUID", res.BootID)
	}
	for _, line := range strings.Split(osRelease, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		} else if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			v = v[1 : len(v)-1]
		}
		switch k {
		case "ID":
			res.OS = v
		case "VERSION_ID":
			res.Version = v
		}
	}
	res.RebootRequired = strings.TrimSpace(reboot) == "required"
	return res, nil
}
