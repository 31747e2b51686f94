package host

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var unitRE = regexp.MustCompile(`^[A-Za-z0-9:_.@\\-]+$`)

// Systemd drives one unit (host.systemd).
func (a *Activities) Systemd(ctx context.Context, in SystemdInput) (SystemdResult, error) {
	res, err := a.systemd(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) systemd(ctx context.Context, in SystemdInput) (SystemdResult, error) {
	if !unitRE.MatchString(in.Unit) {
		return SystemdResult{}, invalid(fmt.Sprintf("unit %q is not a unit name", in.Unit))
	}
	if in.Enable && in.Disable {
		return SystemdResult{}, invalid("enable and disable are exclusive")
	}
	wait := 60 * time.Second
	if in.WaitTimeout != "" {
		d, err := time.ParseDuration(in.WaitTimeout)
		if err != nil || d <= 0 {
			return SystemdResult{}, invalid(fmt.Sprintf("waitTimeout %q is not a positive duration", in.WaitTimeout))
		}
		wait = d
	}
	unit := quote(in.Unit)
	var sb strings.Builder
	sb.WriteString("set -e\n")
	if in.DaemonReload {
		sb.WriteString("systemctl daemon-reload\n")
	}
	if in.Enable {
		fmt.Fprintf(&sb, "systemctl enable %s\n", unit)
	}
	if in.Disable {
		fmt.Fprintf(&sb, "systemctl disable %s\n", unit)
	}
	want := ""
	switch in.Action {
	case "", "none":
	case "start", "restart", "reload":
		fmt.Fprintf(&sb, "systemctl %s %s\n", in.Action, unit)
		want = "active"
	case "stop":
		fmt.Fprintf(&sb, "systemctl stop %s\n", unit)
		want = "inactive"
	default:
		return SystemdResult{}, invalid(fmt.Sprintf("action %q must be start, stop, restart, reload or none", in.Action))
	}
	sb.WriteString("set +e\n")
	// Poll until the unit settles; a start that ends "failed" stops the wait.
	fmt.Fprintf(&sb, `deadline=$(( $(date +%%s) + %d ))
while :; do
  state=$(systemctl is-active %s 2>/dev/null)
  case "%s:$state" in
    active:active|inactive:inactive|inactive:failed|:*) break ;;
    active:failed) break ;;
  esac
  [ "$(date +%%s)" -ge "$deadline" ] && break
  sleep 0.2
done
echo "state=$state" >> "$KEDGE_OUTPUT"
echo "pid=$(systemctl show -p MainPID --value %s 2>/dev/null)" >> "$KEDGE_OUTPUT"
`, int(wait.Seconds()+0.5), unit, want, unit)
	res, err := a.exec(ctx, in.Target, "", "sh -s", strings.NewReader(sb.String()), wait+time.Minute, 16<<10)
	if err != nil {
		return SystemdResult{}, err
	}
	if res.ExitCode != 0 {
		return SystemdResult{}, &typedError{typ: ErrTypeCommandFailed,
			msg: fmt.Sprintf("systemctl on %s failed with exit status %d%s", in.Target.Node, res.ExitCode, tailLine(res.Stderr))}
	}
	out := SystemdResult{ActiveState: res.Outputs["state"]}
	out.MainPID, _ = strconv.Atoi(strings.TrimSpace(res.Outputs["pid"]))
	switch {
	case out.ActiveState == "failed" && want != "inactive":
		return out, &typedError{typ: ErrTypeUnitFailed, msg: fmt.Sprintf("%s failed on %s (see journalctl -u %s)", in.Unit, in.Target.Node, in.Unit)}
	case want != "" && out.ActiveState != want && !(want == "inactive" && out.ActiveState == "failed"):
		return out, &typedError{typ: ErrTypeUnitFailed, msg: fmt.Sprintf("%s is %s on %s after %s, want %s", in.Unit, out.ActiveState, in.Target.Node, wait, want)}
	}
	return out, nil
}
