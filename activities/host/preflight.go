package host

import (
	"context"
	"fmt"
	"strings"
)

// Preflight logs in, becomes root the way the inventory says, and fails
// non-retryably when that does not give root: sudo missing or wanting a
// password, or a non-root login with no become (host.preflight).
func (a *Activities) Preflight(ctx context.Context, in PreflightInput) (PreflightResult, error) {
	res, err := a.preflight(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) preflight(ctx context.Context, in PreflightInput) (PreflightResult, error) {
	t := in.Target
	if err := a.Pool.CheckBecome(ctx, t); err != nil {
		return PreflightResult{}, err
	}
	out, err := a.exec(ctx, t, execSpec{command: "id -un; id -u", limit: 4096})
	if err != nil {
		return PreflightResult{}, err
	}
	res := PreflightResult{User: t.User, Become: t.Become}
	f := strings.Fields(out.Stdout)
	if out.ExitCode != 0 || len(f) != 2 {
		return res, &typedError{typ: ErrTypeCommandFailed, msg: fmt.Sprintf("preflight on %s: id exited %d%s", t.Name(), out.ExitCode, tailLine(out.Stderr))}
	}
	if f[1] != "0" {
		return res, &typedError{typ: ErrTypePrivilege, nonRetryable: true,
			msg: fmt.Sprintf("%s: Kedge logs in as %s (uid %s) and its host actions need root: set ssh.become: sudo in the inventory (with passwordless sudo for %s on the host), or log in as root",
				t.Name(), f[0], f[1], f[0])}
	}
	res.RunsAsRoot = true
	return res, nil
}
