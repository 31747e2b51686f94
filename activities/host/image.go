package host

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"kedge.dev/kedge/actions/imageref"
)

var kubeletVersionRE = regexp.MustCompile(`^Kubernetes (v[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*)$`)

// PullImage pulls the image on the host (host.pull-image): on Flatcar the
// kubelet unit would otherwise pull it in ExecStartPre, inside the
// unit's start timeout, after the node was drained.
func (a *Activities) PullImage(ctx context.Context, in PullImageInput) (PullImageResult, error) {
	res, err := a.pullImage(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) pullImage(ctx context.Context, in PullImageInput) (PullImageResult, error) {
	if err := checkImage(in.Image); err != nil {
		return PullImageResult{}, err
	}
	if in.Runtime != "docker" && in.Runtime != "podman" {
		return PullImageResult{}, invalid(fmt.Sprintf("runtime %q must be docker or podman", in.Runtime))
	}
	timeout := 10 * time.Minute
	if in.Timeout != "" {
		d, err := time.ParseDuration(in.Timeout)
		if err != nil || d <= 0 {
			return PullImageResult{}, invalid(fmt.Sprintf("timeout %q is not a positive duration", in.Timeout))
		}
		timeout = d
	}
	t := in.Target
	img := quote(in.Image)
	var script strings.Builder
	fmt.Fprintf(&script, "%s pull %s >&2 || exit 10\n", in.Runtime, img)
	if in.KubeletVersion {
		fmt.Fprintf(&script, "%s run --rm --network none %s --version || exit 11\n", in.Runtime, img)
	}
	out, err := a.exec(ctx, t, execSpec{script: script.String(), timeout: timeout, limit: 16 << 10,
		details: func(_, stderr *tailBuffer) any {
			return map[string]string{"image": in.Image, "progress": stderr.lastLine()}
		}})
	if err != nil {
		return PullImageResult{}, err
	}
	switch out.ExitCode {
	case 0:
	case 10:
		return PullImageResult{}, &typedError{typ: ErrTypeCommandFailed, details: []any{out.ExitCode},
			msg: fmt.Sprintf("%s pull %s on %s failed%s", in.Runtime, in.Image, t.Name(), tailLine(out.Stderr))}
	case 11:
		return PullImageResult{}, &typedError{typ: ErrTypeCommandFailed, details: []any{out.ExitCode},
			msg: fmt.Sprintf("%s run %s --version on %s failed%s", in.Runtime, in.Image, t.Name(), tailLine(out.Stderr))}
	default:
		return PullImageResult{}, &typedError{typ: ErrTypeCommandFailed, details: []any{out.ExitCode},
			msg: fmt.Sprintf("pulling %s on %s exited %d%s", in.Image, t.Name(), out.ExitCode, tailLine(out.Stderr))}
	}
	res := PullImageResult{Image: in.Image}
	if in.KubeletVersion {
		line := strings.TrimSpace(out.Stdout)
		if i := strings.LastIndex(line, "\n"); i >= 0 {
			line = strings.TrimSpace(line[i+1:])
		}
		m := kubeletVersionRE.FindStringSubmatch(line)
		if m == nil {
			return res, &typedError{typ: ErrTypeCommandFailed, nonRetryable: true,
				msg: fmt.Sprintf("%s on %s: its entrypoint's --version printed %q, not \"Kubernetes vX.Y.Z\": is it a kubelet image?", in.Image, t.Name(), line)}
		}
		res.KubeletVersion = m[1]
	}
	return res, nil
}

// checkImage accepts a reference with a tag or a digest, written out in
// full (what the runtime will be asked for is what was validated).
func checkImage(s string) error {
	if err := imageref.Check(s); err != nil {
		return invalid(err.Error())
	}
	return nil
}
