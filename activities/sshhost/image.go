package sshhost

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/imageref"

	"kedge.dev/kedge/actions/host"
)

var kubeletVersionRE = regexp.MustCompile(`^Kubernetes (v[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*)$`)

// PullImage pulls the image on the host (host.pull-image): on Flatcar the
// kubelet unit would otherwise pull it in ExecStartPre, inside the
// unit's start timeout, after the node was drained.
func (a *Activities) PullImage(ctx context.Context, in host.PullImageInput) (host.PullImageResult, error) {
	res, err := a.pullImage(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) pullImage(ctx context.Context, in host.PullImageInput) (host.PullImageResult, error) {
	if err := checkImage(in.Image); err != nil {
		return host.PullImageResult{}, err
	}
	if in.Runtime != "docker" && in.Runtime != "podman" {
		return host.PullImageResult{}, invalid(fmt.Sprintf("runtime %q must be docker or podman", in.Runtime))
	}
	timeout, err := pullTimeout(in.Timeout)
	if err != nil {
		return host.PullImageResult{}, err
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
		return host.PullImageResult{}, err
	}
	switch out.ExitCode {
	case 0:
	case 10:
		return host.PullImageResult{}, &typedError{typ: errtype.CommandFailed, details: []any{out.ExitCode},
			msg: fmt.Sprintf("%s pull %s on %s failed%s", in.Runtime, in.Image, t.Name(), tailLine(out.Stderr))}
	case 11:
		return host.PullImageResult{}, &typedError{typ: errtype.CommandFailed, details: []any{out.ExitCode},
			msg: fmt.Sprintf("%s run %s --version on %s failed%s", in.Runtime, in.Image, t.Name(), tailLine(out.Stderr))}
	default:
		return host.PullImageResult{}, &typedError{typ: errtype.CommandFailed, details: []any{out.ExitCode},
			msg: fmt.Sprintf("pulling %s on %s exited %d%s", in.Image, t.Name(), out.ExitCode, tailLine(out.Stderr))}
	}
	res := host.PullImageResult{Image: in.Image}
	if in.KubeletVersion {
		line := strings.TrimSpace(out.Stdout)
		if i := strings.LastIndex(line, "\n"); i >= 0 {
			line = strings.TrimSpace(line[i+1:])
		}
		m := kubeletVersionRE.FindStringSubmatch(line)
		if m == nil {
			return res, &typedError{typ: errtype.CommandFailed, nonRetryable: true,
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

// Exit codes of the CRI pull script.
const (
	criNoRoot   = 12 // containerd's root is not a directory
	criListFail = 13 // ctr images ls failed
	criDiskFull = 14 // less free space than asked for, and something to pull
	criPullFail = 15 // ctr images pull failed
)

// PullCRIImages puts images in containerd's k8s.io namespace, where the
// kubelet finds the images of its pods (host.pull-cri-images): each image
// already there is left alone (a static pod's image is not pulled again
// either), the others are pulled with ctr once the file system under
// containerd's root has MinFreeMiB free. One SSH session for all of it.
func (a *Activities) PullCRIImages(ctx context.Context, in host.PullCRIImagesInput) (host.PullCRIImagesResult, error) {
	res, err := a.pullCRIImages(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) pullCRIImages(ctx context.Context, in host.PullCRIImagesInput) (host.PullCRIImagesResult, error) {
	res := host.PullCRIImagesResult{Present: []string{}, Pulled: []string{}}
	address := cmp.Or(in.Address, "/run/containerd/containerd.sock")
	root := cmp.Or(in.Root, "/var/lib/containerd")
	for _, p := range [][2]string{{"address", address}, {"root", root}} {
		if err := checkPath(p[1]); err != nil {
			return res, invalid(fmt.Sprintf("%s: %v", p[0], err))
		}
	}
	minFree := in.MinFreeMiB
	if minFree == 0 {
		minFree = 1024
	}
	if minFree < 0 {
		return res, invalid(fmt.Sprintf("minFreeMiB %d is negative", minFree))
	}
	timeout, err := pullTimeout(in.Timeout)
	if err != nil {
		return res, err
	}
	refs := make([]string, 0, len(in.Images))
	for _, im := range in.Images {
		ref, err := imageref.Full(im)
		if err != nil {
			return res, invalid(err.Error())
		}
		if !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	t := in.Target
	ctr := "ctr -a " + quote(address) + " -n k8s.io"
	var script strings.Builder
	fmt.Fprintf(&script, "[ -d %s ] || exit %d\n", quote(root), criNoRoot)
	fmt.Fprintf(&script, "free=$(df -Pk %s | awk 'NR==2 {print int($4/1024)}')\necho \"free $free\"\n", quote(root))
	fmt.Fprintf(&script, "have=$(%s images ls -q) || exit %d\n", ctr, criListFail)
	for _, ref := range refs {
		r := quote(ref)
		fmt.Fprintf(&script, "if printf '%%s\\n' \"$have\" | grep -qxF %s; then echo \"present \"%s; else\n", r, r)
		fmt.Fprintf(&script, "  [ \"$free\" -ge %d ] || { echo \"short \"%s; exit %d; }\n", minFree, r, criDiskFull)
		fmt.Fprintf(&script, "  echo \"pulling \"%s >&2\n  %s images pull %s >&2 || { echo \"failed \"%s; exit %d; }\n  echo \"pulled \"%s\nfi\n", r, ctr, r, r, criPullFail, r)
	}
	out, err := a.exec(ctx, t, execSpec{script: script.String(), timeout: timeout, limit: 16 << 10,
		details: func(stdout, stderr *tailBuffer) any {
			return map[string]string{"progress": cmp.Or(stderr.lastLine(), stdout.lastLine())}
		}})
	if err != nil {
		return res, err
	}
	var failed string
	for _, line := range strings.Split(out.Stdout, "\n") {
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case "free":
			res.FreeMiB, _ = strconv.ParseInt(rest, 10, 64)
		case "present":
			res.Present = append(res.Present, rest)
		case "pulled":
			res.Pulled = append(res.Pulled, rest)
		case "short", "failed":
			failed = rest
		}
	}
	switch out.ExitCode {
	case 0:
		return res, nil
	case criNoRoot:
		return res, &typedError{typ: errtype.CommandFailed, nonRetryable: true,
			msg: fmt.Sprintf("%s has no directory %s: is containerd's root elsewhere (root)?", t.Name(), root)}
	case criListFail:
		return res, &typedError{typ: errtype.CommandFailed, details: []any{out.ExitCode},
			msg: fmt.Sprintf("listing containerd's images on %s (ctr -a %s -n k8s.io images ls) failed%s", t.Name(), address, tailLine(out.Stderr))}
	case criDiskFull:
		return res, &typedError{typ: errtype.DiskFull, nonRetryable: true, details: []any{res},
			msg: fmt.Sprintf("%s has %d MiB free under %s, less than the %d MiB asked for before pulling %s", t.Name(), res.FreeMiB, root, minFree, failed)}
	case criPullFail:
		return res, &typedError{typ: errtype.CommandFailed, details: []any{res},
			msg: fmt.Sprintf("pulling %s into containerd on %s failed%s", failed, t.Name(), tailLine(out.Stderr))}
	default:
		return res, &typedError{typ: errtype.CommandFailed, details: []any{out.ExitCode},
			msg: fmt.Sprintf("pulling images into containerd on %s exited %d%s", t.Name(), out.ExitCode, tailLine(out.Stderr))}
	}
}

// pullTimeout is a pull's timeout, 10 minutes unless given.
func pullTimeout(s string) (time.Duration, error) {
	if s == "" {
		return 10 * time.Minute, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, invalid(fmt.Sprintf("timeout %q is not a positive duration", s))
	}
	return d, nil
}
