package sshhost

import (
	"context"
	"fmt"
	"strings"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
)

// Preflight logs in, becomes root the way the inventory says, and fails
// non-retryably when that does not give root: sudo missing or wanting a
// password, or a non-root login with no become (host.preflight).
func (a *Activities) Preflight(ctx context.Context, in host.PreflightInput) (host.PreflightResult, error) {
	res, err := a.preflight(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) preflight(ctx context.Context, in host.PreflightInput) (host.PreflightResult, error) {
	t := in.Target
	if err := a.Pool.CheckBecome(ctx, t); err != nil {
		return host.PreflightResult{}, err
	}
	out, err := a.exec(ctx, t, execSpec{command: "id -un; id -u", limit: 4096})
	if err != nil {
		return host.PreflightResult{}, err
	}
	res := host.PreflightResult{User: t.User, Become: t.Become}
	f := strings.Fields(out.Stdout)
	if out.ExitCode != 0 || len(f) != 2 {
		return res, &typedError{typ: errtype.CommandFailed, msg: fmt.Sprintf("preflight on %s: id exited %d%s", t.Name(), out.ExitCode, tailLine(out.Stderr))}
	}
	if f[1] != "0" {
		return res, &typedError{typ: errtype.PrivilegeEscalationFailed, nonRetryable: true,
			msg: fmt.Sprintf("%s: Kedge logs in as %s (uid %s) and its host actions need root: set ssh.become: sudo in the inventory (with passwordless sudo for %s on the host), or log in as root",
				t.Name(), f[0], f[1], f[0])}
	}
	res.RunsAsRoot = true
	return res, nil
}
