package sshhost

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
)

// defaultRebootWithin is how long a host may take to come back.
const defaultRebootWithin = 15 * time.Minute

// rebootPoll is how often a rebooting host is asked for its boot ID.
const rebootPoll = time.Second

// Reboot reboots the host unless it booted since in.NotBootID, and waits
// until it answers with a new boot ID (host.reboot). A retried call
// after the reboot finds the new boot ID and reboots nothing.
func (a *Activities) Reboot(ctx context.Context, in host.RebootInput) (host.RebootResult, error) {
	res, err := a.reboot(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) reboot(ctx context.Context, in host.RebootInput) (host.RebootResult, error) {
	within := defaultRebootWithin
	if in.Within != "" {
		d, err := time.ParseDuration(in.Within)
		if err != nil || d <= 0 {
			return host.RebootResult{}, invalid(fmt.Sprintf("within %q is not a positive duration", in.Within))
		}
		within = d
	}
	if in.NotBootID == "" {
		return host.RebootResult{}, invalid("host.reboot needs notBootId, the boot ID before the reboot")
	}
	t := in.Target
	before, err := a.bootInfo(ctx, t)
	if err != nil {
		return host.RebootResult{}, err
	}
	if before.BootID != in.NotBootID {
		return host.RebootResult{BootInfoResult: before}, nil // booted since: an attempt before rebooted it
	}
	info := host.RebootResult{BootInfoResult: before, RebootedAt: before.HostTime}
	began := time.Now()
	out, err := a.exec(ctx, t, execSpec{command: "systemctl reboot", limit: 16 << 10})
	switch {
	case err == nil && out.ExitCode != 0:
		return info, &typedError{typ: errtype.CommandFailed, details: []any{out.ExitCode},
			msg: fmt.Sprintf("systemctl reboot on %s: exit status %d%s", t.Name(), out.ExitCode, tailLine(out.Stderr))}
	case err != nil && ctx.Err() != nil:
		return info, err
	case errtype.Is(toTemporal(err), errtype.PrivilegeEscalationFailed):
		return info, err
	}
	// Anything else (the session cut as the host went down) is the reboot.
	deadline := began.Add(within)
	for {
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, map[string]any{"rebooting": time.Since(began).Round(time.Second).String()})
		}
		select {
		case <-ctx.Done():
			return info, fmt.Errorf("reboot of %s: %w", t.Name(), ctx.Err())
		case <-time.After(rebootPoll):
		}
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		now, err := a.bootInfo(tctx, t)
		cancel()
		switch {
		case err == nil && now.BootID != in.NotBootID:
			return host.RebootResult{BootInfoResult: now, RebootedAt: before.HostTime}, nil
		case err != nil && !retryable(err):
			return info, err
		case time.Now().After(deadline):
			why := "it still runs the boot it had"
			if err != nil {
				why = "it does not answer: " + err.Error()
			}
			return info, &typedError{typ: errtype.HostNotBack, nonRetryable: true,
				msg: fmt.Sprintf("%s did not come back with a new boot within %s of its reboot: %s", t.Name(), within, why)}
		}
	}
}

// retryable says whether a failed look at a rebooting host may be tried
// again: a host that is down, or refusing while it starts, is; one whose
// key or login is refused is not.
func retryable(err error) bool {
	var te *typedError
	if errors.As(err, &te) {
		return !te.nonRetryable
	}
	typ := errtype.Of(toTemporal(err))
	return typ != errtype.HostKeyMismatch && typ != errtype.HostUnknown && typ != errtype.AuthFailed && typ != errtype.PrivilegeEscalationFailed
}
