package sshhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/layout"

	"kedge.dev/kedge/actions/host"
)

var unitRE = regexp.MustCompile(`^[A-Za-z0-9:_.@\\-]+$`)

const (
	defaultWaitTimeout = 60 * time.Second
	// systemdSlack is how much longer than waitTimeout the remote script
	// may take (systemctl calls block) before it is killed.
	systemdSlack = 30 * time.Second
)

// Systemd drives one unit (host.systemd).
func (a *Activities) Systemd(ctx context.Context, in host.SystemdInput) (host.SystemdResult, error) {
	res, err := a.systemd(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) systemd(ctx context.Context, in host.SystemdInput) (host.SystemdResult, error) {
	if !unitRE.MatchString(in.Unit) || strings.HasPrefix(in.Unit, "-") {
		return host.SystemdResult{}, invalid(fmt.Sprintf("unit %q is not a unit name", in.Unit))
	}
	if in.Enable && in.Disable {
		return host.SystemdResult{}, invalid("enable and disable are exclusive")
	}
	wait := defaultWaitTimeout
	if in.WaitTimeout != "" {
		d, err := time.ParseDuration(in.WaitTimeout)
		if err != nil || d <= 0 {
			return host.SystemdResult{}, invalid(fmt.Sprintf("waitTimeout %q is not a positive duration", in.WaitTimeout))
		}
		wait = d
	}
	// want is the state the unit should settle in: "active", "inactive",
	// or "any" (no action: just report).
	want := "any"
	switch in.Action {
	case "", "none":
	case "start", "restart", "reload":
		want = "active"
	case "stop":
		want = "inactive"
	default:
		return host.SystemdResult{}, invalid(fmt.Sprintf("action %q must be start, stop, restart, reload or none", in.Action))
	}
	if len(in.ExpectEnvironment) > 0 {
		if err := a.checkEnvironment(ctx, in); err != nil {
			return host.SystemdResult{}, err
		}
		in.DaemonReload = false // done
	}
	script := systemdScript(in, want, wait, a.restartRecord(ctx, in))
	res, err := a.exec(ctx, in.Target, execSpec{
		script: script, timeout: wait + systemdSlack, limit: 16 << 10,
		details: func(stdout, _ *tailBuffer) any {
			return map[string]string{"unit": in.Unit, "state": stdout.lastLine()}
		},
	})
	if err != nil {
		return host.SystemdResult{}, timeoutSaid(err, fmt.Sprintf("systemctl %s %s on %s did not finish in %s", in.Action, in.Unit, in.Target.Name(), wait+systemdSlack))
	}
	if res.ExitCode != 0 {
		return host.SystemdResult{}, &typedError{typ: errtype.CommandFailed, details: []any{res.ExitCode},
			msg: fmt.Sprintf("systemctl on %s failed with exit status %d%s", in.Target.Name(), res.ExitCode, tailLine(res.Stderr))}
	}
	if res.Outputs["repeat"] != "" && activity.IsActivity(ctx) {
		activity.GetLogger(ctx).Warn("restart already done by an earlier delivery of this activity; not restarting again",
			"unit", in.Unit, "node", in.Target.Name(), "startedAt", res.Outputs["started_at"])
	}
	out := host.SystemdResult{ActiveState: strings.TrimSpace(res.Outputs["state"]), StartedAt: strings.TrimSpace(res.Outputs["started_at"])}
	out.MainPID, _ = strconv.Atoi(strings.TrimSpace(res.Outputs["pid"]))
	actionRC, _ := strconv.Atoi(strings.TrimSpace(res.Outputs["action_rc"]))
	journal := fmt.Sprintf(" (see journalctl -u %s)", in.Unit)
	switch {
	case out.ActiveState == "failed" && want != "inactive":
		return out, &typedError{typ: errtype.UnitFailed,
			msg: fmt.Sprintf("%s failed on %s%s%s", in.Unit, in.Target.Name(), journal, tailLine(res.Stderr))}
	case actionRC != 0:
		return out, &typedError{typ: errtype.CommandFailed, details: []any{actionRC},
			msg: fmt.Sprintf("systemctl %s %s on %s failed with exit status %d%s", in.Action, in.Unit, in.Target.Name(), actionRC, tailLine(res.Stderr))}
	case !settled(want, out.ActiveState, res.Outputs["type"]):
		return out, &typedError{typ: errtype.UnitFailed,
			msg: fmt.Sprintf("%s is %s on %s after %s, want %s%s", in.Unit, out.ActiveState, in.Target.Name(), wait, want, journal)}
	}
	return out, nil
}

// settled mirrors the script's loop condition.
func settled(want, state, unitType string) bool {
	switch want {
	case "active":
		// A oneshot unit without RemainAfterExit is inactive once it
		// has run successfully.
		return state == "active" || state == "inactive" && strings.TrimSpace(unitType) == "oneshot"
	case "inactive":
		return state == "inactive" || state == "failed"
	}
	return true
}

// restartRecord is the file on the host where a restart by this activity
// is recorded: Temporal delivers an activity task at least once, and a
// second delivery of a restart that did happen (its completion lost, say,
// while Temporal's database was away) must not restart the unit again
// while the invocation it started still runs. The name is a digest of
// the attempt's identity (its activity and attempt number: Temporal
// retries an action as attempts of one activity, and a new attempt
// restarts); "" outside an activity or for any other action.
func (a *Activities) restartRecord(ctx context.Context, in host.SystemdInput) string {
	if in.Action != "restart" || !activity.IsActivity(ctx) {
		return ""
	}
	return path.Join(a.runDir(), "restarts", restartDigest(activity.GetInfo(ctx), in.Unit))
}

func restartDigest(info activity.Info, unit string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{info.Namespace, info.WorkflowExecution.ID,
		info.WorkflowExecution.RunID, info.ActivityID, strconv.Itoa(int(info.Attempt)), unit}, "\x00")))
	return hex.EncodeToString(sum[:16])
}

// systemdScript does everything in one session: daemon-reload,
// enable/disable, the action, then polls is-active until the unit
// settles or the wait runs out, printing each new state on stdout (for
// heartbeats) and reporting state, MainPID and the action's exit status
// through $KEDGE_OUTPUT. With a record file, a restart is done once: when
// the record names the unit's current invocation (systemd's InvocationID,
// new at every start), the restart already happened and only its report
// is repeated; after a restart that settles, the record is written.
func systemdScript(in host.SystemdInput, want string, wait time.Duration, record string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "unit=%s\n", quote(in.Unit))
	fmt.Fprintf(&b, "deadline=$(( $(date +%%s) + %d ))\n", int((wait+time.Second-1)/time.Second))
	if in.DaemonReload {
		b.WriteString("systemctl daemon-reload || exit $?\n")
	}
	if in.Enable {
		b.WriteString(`systemctl enable "$unit" || exit $?` + "\n")
	}
	if in.Disable {
		b.WriteString(`systemctl disable "$unit" || exit $?` + "\n")
	}
	b.WriteString("rc=0\nrepeat=\n")
	if record != "" {
		fmt.Fprintf(&b, `record=%s
inv=$(systemctl show -p InvocationID --value "$unit" 2>/dev/null)
if [ -n "$inv" ] && [ -f "$record" ] && grep -qx "invocation=$inv" "$record"; then
  repeat=1
  started_at=$(sed -n 's/^started_at=//p' "$record")
  echo "repeat=1" >> "$KEDGE_OUTPUT"
fi
`, quote(record))
	}
	b.WriteString(`[ -n "$repeat" ] || started_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)` + "\n")
	b.WriteString(`echo "started_at=$started_at" >> "$KEDGE_OUTPUT"` + "\n")
	if in.Action != "" && in.Action != "none" {
		fmt.Fprintf(&b, "[ -n \"$repeat\" ] || { systemctl %s \"$unit\"; rc=$?; }\n", in.Action)
	}
	fmt.Fprintf(&b, `echo "action_rc=$rc" >> "$KEDGE_OUTPUT"
type=$(systemctl show -p Type --value "$unit" 2>/dev/null)
echo "type=$type" >> "$KEDGE_OUTPUT"
last=
while :; do
  state=$(systemctl is-active "$unit" 2>/dev/null)
  [ "$state" = "$last" ] || echo "$state"
  last=$state
  case "%s:$state:$type" in
    any:*|active:active:*|active:failed:*|active:inactive:oneshot|inactive:inactive:*|inactive:failed:*) break ;;
  esac
  [ "$rc" -eq 0 ] || break
  [ "$(date +%%s)" -lt "$deadline" ] || break
  sleep 0.2
done
echo "state=$state" >> "$KEDGE_OUTPUT"
echo "pid=$(systemctl show -p MainPID --value "$unit" 2>/dev/null)" >> "$KEDGE_OUTPUT"
`, want)
	if record != "" {
		// Best effort: a record that cannot be written costs a second
		// restart on a second delivery, never the restart that worked.
		// Records older than a day are of activities long closed.
		b.WriteString(`if [ -z "$repeat" ] && [ "$rc" -eq 0 ] && [ "$state" = active ]; then
  dir=$(dirname "$record")
  { mkdir -p "$dir" && { echo "started_at=$started_at"; echo "invocation=$(systemctl show -p InvocationID --value "$unit")"; } > "$record.tmp" && mv -f "$record.tmp" "$record"; } 2>/dev/null || :
  find "$dir" -type f -mmin +1440 -delete 2>/dev/null || :
fi
`)
	}
	return b.String()
}

// checkEnvironment reloads systemd (when asked) and compares the
// Environment it reports for the unit with in.ExpectEnvironment.
func (a *Activities) checkEnvironment(ctx context.Context, in host.SystemdInput) error {
	var b strings.Builder
	if in.DaemonReload {
		b.WriteString("systemctl daemon-reload || exit $?\n")
	}
	fmt.Fprintf(&b, "systemctl show -p Environment -p FragmentPath -p DropInPaths %s\n", quote(in.Unit))
	res, err := a.exec(ctx, in.Target, execSpec{script: b.String(), timeout: systemdSlack, limit: 64 << 10})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return &typedError{typ: errtype.CommandFailed, msg: fmt.Sprintf("systemctl show %s on %s failed with exit status %d%s", in.Unit, in.Target.Name(), res.ExitCode, tailLine(res.Stderr))}
	}
	props := map[string]string{}
	for line := range strings.Lines(res.Stdout) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			props[k] = v
		}
	}
	words, err := layout.SplitWords(props["Environment"])
	if err != nil {
		return &typedError{typ: errtype.CommandFailed, msg: fmt.Sprintf("%s on %s: Environment: %v", in.Unit, in.Target.Name(), err)}
	}
	env := map[string]string{}
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok {
			env[k] = v
		}
	}
	keys := make([]string, 0, len(in.ExpectEnvironment))
	for k := range in.ExpectEnvironment {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if got, want := env[k], in.ExpectEnvironment[k]; got != want {
			return &typedError{typ: errtype.NotInEffect, nonRetryable: true,
				msg: fmt.Sprintf("%s on %s: systemd uses %s=%q, not %q (unit %s, drop-ins in order: %s): a later drop-in or the unit overrides it",
					in.Unit, in.Target.Name(), k, got, want, props["FragmentPath"], dash(props["DropInPaths"]))}
		}
	}
	return nil
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "none"
	}
	return s
}
