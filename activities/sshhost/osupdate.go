package sshhost

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/target"
)

// OSUpdate stages the host's OS update with its own tool
// (host.os-update).
func (a *Activities) OSUpdate(ctx context.Context, in host.OSUpdateInput) (host.OSUpdateResult, error) {
	res, err := a.osUpdate(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) osUpdate(ctx context.Context, in host.OSUpdateInput) (host.OSUpdateResult, error) {
	info, err := a.bootInfo(ctx, in.Target)
	if err != nil {
		return host.OSUpdateResult{}, err
	}
	res := host.OSUpdateResult{Updater: info.Updater, BootID: info.BootID, Booted: info.Booted, Next: info.Booted}
	switch info.Updater {
	case host.UpdaterApt:
		err = a.aptUpgrade(ctx, in, &res)
	case host.UpdaterRPMOSTree:
		err = a.rpmOSTreeUpgrade(ctx, in, &res)
	case host.UpdaterUpdateEngine:
		err = a.updateEngine(ctx, in, &res)
	default:
		return res, &typedError{typ: errtype.UpdateUnsupported, nonRetryable: true,
			msg: fmt.Sprintf("%s runs %s %s: Kedge updates Debian and Ubuntu (apt), Fedora CoreOS (rpm-ostree) and Flatcar (update_engine)", in.Target.Name(), info.OS, info.Version)}
	}
	if err != nil {
		return res, err
	}
	res.Staged = res.RebootRequired && res.Next != res.Booted || res.Staged
	return res, nil
}

// bootInfo reads host.boot-info's facts.
func (a *Activities) bootInfo(ctx context.Context, t target.SSH) (host.BootInfoResult, error) {
	out, err := a.exec(ctx, t, execSpec{command: bootInfoCommand, limit: 64 << 10})
	if err != nil {
		return host.BootInfoResult{}, err
	}
	if out.ExitCode != 0 {
		return host.BootInfoResult{}, &typedError{typ: errtype.CommandFailed,
			msg: fmt.Sprintf("boot info on %s: exit %d%s", t.Name(), out.ExitCode, tailLine(out.Stderr))}
	}
	res, err := parseBootInfo(out.Stdout)
	if err != nil {
		return res, &typedError{typ: errtype.CommandFailed, msg: fmt.Sprintf("boot info on %s: %v", t.Name(), err)}
	}
	return res, nil
}

// runScript runs script as root on t and returns its stdout; a non-zero exit
// not in accept is a CommandFailed error naming what.
func (a *Activities) runScript(ctx context.Context, t target.SSH, what, script string, accept ...int) (string, int, error) {
	out, err := a.exec(ctx, t, execSpec{script: script, limit: 256 << 10})
	if err != nil {
		return "", 0, err
	}
	if out.ExitCode != 0 && !slices.Contains(accept, out.ExitCode) {
		return out.Stdout, out.ExitCode, &typedError{typ: errtype.CommandFailed, details: []any{out.ExitCode},
			msg: fmt.Sprintf("%s on %s: exit status %d%s", what, t.Name(), out.ExitCode, tailLine(out.Stderr))}
	}
	return out.Stdout, out.ExitCode, nil
}

// aptScript upgrades what apt may upgrade, held packages kept as they
// are (apt never upgrades a held package; the holds are listed before and
// after so that a change is seen), with the configuration files the
// operator changed kept. It prints the holds before and after and the
// packages that asked for a reboot.
const aptScript = `set -e
export DEBIAN_FRONTEND=noninteractive
echo '--- held'
apt-mark showhold
apt-get -q update >&2
if [ "$KEDGE_CHECK_ONLY" = 1 ]; then
  apt-get -q -s upgrade --with-new-pkgs >&2
else
  apt-get -q -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold upgrade --with-new-pkgs >&2
fi
echo '--- held after'
apt-mark showhold
echo '--- reboot'
if [ -e /run/reboot-required ]; then echo required; cat /run/reboot-required.pkgs 2>/dev/null || true; fi
`

func (a *Activities) aptUpgrade(ctx context.Context, in host.OSUpdateInput, res *host.OSUpdateResult) error {
	script := aptScript
	if in.CheckOnly {
		script = "KEDGE_CHECK_ONLY=1\n" + script
	}
	out, _, err := a.runScript(ctx, in.Target, "apt-get upgrade", script)
	if err != nil {
		return err
	}
	apt, err := parseApt(out)
	if err != nil {
		return &typedError{typ: errtype.CommandFailed, msg: fmt.Sprintf("apt-get upgrade on %s: %v", in.Target.Name(), err)}
	}
	if !slices.Equal(apt.held, apt.heldAfter) {
		return &typedError{typ: errtype.CommandFailed, nonRetryable: true,
			msg: fmt.Sprintf("apt-get upgrade on %s changed the held packages: %v before, %v after", in.Target.Name(), apt.held, apt.heldAfter)}
	}
	res.Held, res.RebootRequired = apt.held, apt.reboot
	if apt.kernel != "" {
		res.Next = apt.kernel
	}
	res.Staged = apt.reboot
	return nil
}

type aptOutcome struct {
	held, heldAfter []string
	reboot          bool
	kernel          string // the kernel release a kernel package asked to boot
}

// parseApt reads aptScript's output. A kernel package among those that
// asked for a reboot (linux-image-RELEASE, as Debian and Ubuntu name
// them) names the release the next boot runs.
func parseApt(s string) (aptOutcome, error) {
	var o aptOutcome
	_, rest, ok := strings.Cut(s, "--- held\n")
	held, rest, ok2 := strings.Cut(rest, "--- held after\n")
	after, reboot, ok3 := strings.Cut(rest, "--- reboot\n")
	if !ok || !ok2 || !ok3 {
		return o, fmt.Errorf("unexpected output %.200q", s)
	}
	o.held, o.heldAfter = strings.Fields(held), strings.Fields(after)
	lines := strings.Fields(reboot)
	o.reboot = len(lines) > 0 && lines[0] == "required"
	for _, p := range lines[min(1, len(lines)):] {
		if r, ok := strings.CutPrefix(p, "linux-image-"); ok && r != "" && !strings.HasPrefix(r, "generic") && !strings.HasPrefix(r, "amd64") && !strings.HasPrefix(r, "arm64") {
			o.kernel = r // the last one listed is the newest installed
		}
	}
	return o, nil
}

// rpmOSTreeScript stages the next deployment (exit 77: none) and prints
// the deployments as JSON. A check only reads, so it bypasses an update
// driver; an upgrade does only when asked to ($KEDGE_BYPASS).
const rpmOSTreeScript = `rc=0
if [ "$KEDGE_CHECK_ONLY" = 1 ]; then rpm-ostree upgrade --check --bypass-driver >&2 || rc=$?; else rpm-ostree upgrade --unchanged-exit-77 $KEDGE_BYPASS >&2 || rc=$?; fi
case $rc in 0|77) ;; *) exit $rc ;; esac
rpm-ostree status --json
`

// drivenBy is how rpm-ostree begins its refusal while an update driver
// (Zincati) owns the host's updates: "error: Updates and deployments are
// driven by Zincati (zincati.service)".
const drivenBy = "Updates and deployments are driven by "

func (a *Activities) rpmOSTreeUpgrade(ctx context.Context, in host.OSUpdateInput, res *host.OSUpdateResult) error {
	script := rpmOSTreeScript
	switch {
	case in.CheckOnly:
		script = "KEDGE_CHECK_ONLY=1\n" + script
	case in.BypassUpdateDriver:
		script = "KEDGE_BYPASS=--bypass-driver\n" + script
	default:
		script = "KEDGE_BYPASS=\n" + script
	}
	run, err := a.exec(ctx, in.Target, execSpec{script: script, limit: 256 << 10})
	if err != nil {
		return err
	}
	if _, driver, ok := strings.Cut(run.Stderr, drivenBy); ok && run.ExitCode != 0 {
		driver, _, _ = strings.Cut(driver, "\n")
		return &typedError{typ: errtype.UpdateDriverActive, nonRetryable: true,
			msg: fmt.Sprintf("%s: rpm-ostree refused to stage an update: its updates are driven by %s. "+
				"Let Zincati ask Kedge before it reboots (FleetLock: kedge fleetlock-url), or stop and mask zincati.service for Kedge's waves, "+
				"or set bypassUpdateDriver to stage anyway (Zincati may then also stage and reboot on its own)", in.Target.Name(), driver)}
	}
	if run.ExitCode != 0 {
		return &typedError{typ: errtype.CommandFailed, details: []any{run.ExitCode},
			msg: fmt.Sprintf("rpm-ostree upgrade on %s: exit status %d%s", in.Target.Name(), run.ExitCode, tailLine(run.Stderr))}
	}
	out := run.Stdout
	next, pending, err := parseRPMOSTreeStatus(out)
	if err != nil {
		return &typedError{typ: errtype.CommandFailed, msg: fmt.Sprintf("rpm-ostree status on %s: %v", in.Target.Name(), err)}
	}
	if pending {
		res.Next, res.RebootRequired, res.Staged = next, true, true
	}
	return nil
}

// parseRPMOSTreeStatus reads `rpm-ostree status --json`: the deployment
// the next boot runs (the first listed) and whether it is another than
// the booted one.
func parseRPMOSTreeStatus(s string) (next string, pending bool, err error) {
	var st struct {
		Deployments []struct {
			Version string `json:"version"`
			Booted  bool   `json:"booted"`
			Staged  bool   `json:"staged"`
		} `json:"deployments"`
	}
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return "", false, fmt.Errorf("unexpected output: %w", err)
	}
	if len(st.Deployments) == 0 {
		return "", false, fmt.Errorf("no deployments listed")
	}
	first := st.Deployments[0]
	return first.Version, !first.Booted, nil
}

// updateEngineStatus is update_engine_client -status, parsed.
type updateEngineStatus struct {
	lastChecked, op, newVersion string
}

const (
	updateNeedReboot = "UPDATE_STATUS_UPDATED_NEED_REBOOT"
	updateIdle       = "UPDATE_STATUS_IDLE"
	updateError      = "UPDATE_STATUS_REPORTING_ERROR_EVENT"
)

func parseUpdateEngineStatus(s string) (updateEngineStatus, error) {
	var st updateEngineStatus
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "LAST_CHECKED_TIME":
			st.lastChecked = v
		case "CURRENT_OP":
			st.op = v
		case "NEW_VERSION":
			st.newVersion = v
		}
	}
	if st.op == "" {
		return st, fmt.Errorf("no CURRENT_OP in %.200q", s)
	}
	return st, nil
}

// updateEngine has Flatcar's update_engine check for an update and
// download it, polling its status until it needs a reboot or is idle
// again after a check.
func (a *Activities) updateEngine(ctx context.Context, in host.OSUpdateInput, res *host.OSUpdateResult) error {
	status := func() (updateEngineStatus, error) {
		out, _, err := a.runScript(ctx, in.Target, "update_engine_client -status", "update_engine_client -status 2>/dev/null")
		if err != nil {
			return updateEngineStatus{}, err
		}
		st, err := parseUpdateEngineStatus(out)
		if err != nil {
			return st, &typedError{typ: errtype.CommandFailed, msg: fmt.Sprintf("update_engine_client -status on %s: %v", in.Target.Name(), err)}
		}
		return st, nil
	}
	st, err := status()
	if err != nil {
		return err
	}
	if st.op != updateNeedReboot && !in.CheckOnly {
		before := st.lastChecked
		if _, _, err := a.runScript(ctx, in.Target, "update_engine_client -check_for_update", "update_engine_client -check_for_update >&2"); err != nil {
			return err
		}
		for st.op != updateNeedReboot && (st.op != updateIdle || st.lastChecked == before) {
			if st.op == updateError {
				return &typedError{typ: errtype.CommandFailed, msg: fmt.Sprintf("update_engine on %s reports an error (%s)", in.Target.Name(), st.op)}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("update_engine on %s: %w", in.Target.Name(), ctx.Err())
			case <-time.After(time.Second):
			}
			if st, err = status(); err != nil {
				return err
			}
		}
	}
	if st.op == updateNeedReboot {
		res.Next, res.RebootRequired, res.Staged = st.newVersion, true, true
	}
	return nil
}
