package sshhost

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"kedge.dev/kedge/actions/layout"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
)

const prepareTimeout = 5 * time.Minute

// PrepareNode makes a host ready for the kubelet node-join installs
// (host.prepare-node): the kernel modules and sysctls its files persist
// are loaded and applied now, systemd reloads the units just written, and
// the units the kubelet needs are enabled and started before it.
func (a *Activities) PrepareNode(ctx context.Context, in host.PrepareNodeInput) (host.PrepareNodeResult, error) {
	res, err := a.prepareNode(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) prepareNode(ctx context.Context, in host.PrepareNodeInput) (host.PrepareNodeResult, error) {
	if err := validatePrepareNode(in); err != nil {
		return host.PrepareNodeResult{}, err
	}
	timeout := prepareTimeout
	if in.Timeout != "" {
		d, err := time.ParseDuration(in.Timeout)
		if err != nil || d <= 0 {
			return host.PrepareNodeResult{}, invalid(fmt.Sprintf("timeout %q is not a positive duration", in.Timeout))
		}
		timeout = d
	}
	t := in.Target
	out, err := a.exec(ctx, t, execSpec{script: prepareScript(in), timeout: timeout, limit: 16 << 10,
		details: func(stdout, _ *tailBuffer) any { return map[string]string{"step": stdout.lastLine()} }})
	if err != nil {
		return host.PrepareNodeResult{}, timeoutSaid(err, fmt.Sprintf("preparing %s did not finish in %s", t.Name(), timeout))
	}
	if out.ExitCode != 0 {
		return host.PrepareNodeResult{}, &typedError{typ: errtype.CommandFailed, details: []any{out.ExitCode},
			msg: fmt.Sprintf("preparing %s: %s failed with exit status %d (units enabled or started by it taken back)%s", t.Name(), dash(out.Outputs["failed"]), out.ExitCode, tailLine(out.Stderr))}
	}
	// Reported newest first: the undo stops and disables in that order.
	res := host.PrepareNodeResult{Enabled: []string{}, Started: []string{}}
	res.Enabled = append(res.Enabled, strings.Fields(out.Outputs["enabled"])...)
	res.Started = append(res.Started, strings.Fields(out.Outputs["started"])...)
	return res, nil
}

// validatePrepareNode checks a host.prepare-node input before anything
// reaches the host.
func validatePrepareNode(in host.PrepareNodeInput) error {
	for _, m := range in.Modules {
		if !layout.ModuleRE.MatchString(m) {
			return invalid(fmt.Sprintf("modules: %q is not a kernel module's name", m))
		}
	}
	for _, f := range in.SysctlFiles {
		if err := checkPath(f); err != nil {
			return invalid(fmt.Sprintf("sysctlFiles: %v", err))
		}
		if path.Dir(f) != "/etc/sysctl.d" || !strings.HasSuffix(f, ".conf") || strings.ContainsAny(f, bundleUnsafe) {
			return invalid(fmt.Sprintf("sysctlFiles: %q is not a .conf file in /etc/sysctl.d", f))
		}
	}
	for field, units := range map[string][]string{"enable": in.Enable, "start": in.Start, "stop": in.Stop, "disable": in.Disable} {
		for _, u := range units {
			if !unitRE.MatchString(u) || strings.HasPrefix(u, "-") {
				return invalid(fmt.Sprintf("%s: %q is not a unit name", field, u))
			}
		}
	}
	if slices.ContainsFunc(in.Start, func(u string) bool { return slices.Contains(in.Stop, u) }) {
		return invalid("a unit cannot be in both start and stop")
	}
	return nil
}

// prepareScript does it all in one session. Each step names itself on
// stdout (heartbeats) and, when it fails, in $KEDGE_OUTPUT (failed=). A
// failure after a unit was enabled or started takes that back (stopped,
// disabled) before it exits: the units are left as they were.
func prepareScript(in host.PrepareNodeInput) string {
	var b strings.Builder
	b.WriteString(`set -u
enabled=
started=
fail() {
  echo "failed=$1" >> "$KEDGE_OUTPUT"
  for u in $started; do systemctl stop "$u" || :; done
  for u in $enabled; do systemctl disable "$u" || :; done
  exit 1
}
`)
	for _, u := range in.Stop {
		fmt.Fprintf(&b, "echo stop %[1]s; systemctl stop %[1]s || fail %[2]s\n", quote(u), quote("systemctl stop "+u))
	}
	for _, u := range in.Disable {
		fmt.Fprintf(&b, "echo disable %[1]s; systemctl disable %[1]s || fail %[2]s\n", quote(u), quote("systemctl disable "+u))
	}
	for _, m := range in.Modules {
		fmt.Fprintf(&b, "echo modprobe %[1]s; modprobe -- %[1]s || fail %[2]s\n", quote(m), quote("modprobe "+m))
	}
	for _, f := range in.SysctlFiles {
		fmt.Fprintf(&b, "echo sysctl -p %[1]s; sysctl -q -p %[1]s || fail %[2]s\n", quote(f), quote("sysctl -p "+f))
	}
	b.WriteString("echo daemon-reload; systemctl daemon-reload || fail 'systemctl daemon-reload'\n")
	for _, u := range in.Enable {
		fmt.Fprintf(&b, `u=%s
if [ "$(systemctl is-enabled "$u" 2>/dev/null)" != enabled ]; then
  echo "enable $u"; systemctl enable "$u" || fail "systemctl enable $u"
  enabled="$u $enabled"
fi
`, quote(u))
	}
	again := "start"
	if in.Restart {
		again = "restart"
	}
	for _, u := range in.Start {
		fmt.Fprintf(&b, `u=%[1]s
if [ "$(systemctl is-active "$u" 2>/dev/null)" = active ]; then
  echo "%[2]s $u"; systemctl %[2]s "$u" || fail "systemctl %[2]s $u"
else
  echo "start $u"; started="$u $started"
  systemctl start "$u" || fail "systemctl start $u"
fi
[ "$(systemctl is-active "$u" 2>/dev/null)" = active ] || fail "$u is not active after its start (see journalctl -u $u)"
`, quote(u), again)
	}
	b.WriteString(`{ echo "enabled=$enabled"; echo "started=$started"; } >> "$KEDGE_OUTPUT"` + "\n")
	return b.String()
}
