package sshhost

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/pkg/sftp"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/layout"

	"kedge.dev/kedge/actions/host"
)

// facts asks systemd about the units layout.Discover needs, and the
// host's name. Constant: nothing from the input reaches the shell.
var factsScript = func() string {
	var b strings.Builder
	for _, u := range layout.Units {
		fmt.Fprintf(&b, "echo '@unit %s'; systemctl show -p LoadState -p ActiveState -p UnitFileState -p FragmentPath -p DropInPaths -p Environment %s || exit 1\n", u, u)
	}
	b.WriteString("echo '@hostname'; hostname\n")
	return b.String()
}()

// maxLayoutFile bounds each file host.layout reads.
const maxLayoutFile = 1 << 20

// Layout reads the host's layout (host.layout): what systemd reports for
// kubelet.service, kubelet.path and etcd-member.service, then, over SFTP,
// the files they and the kubelet's configuration name.
func (a *Activities) Layout(ctx context.Context, in host.LayoutInput) (host.LayoutResult, error) {
	res, err := a.layout(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) layout(ctx context.Context, in host.LayoutInput) (host.LayoutResult, error) {
	t := in.Target
	for _, k := range in.Require {
		if !layout.Known(k) && k != layout.KindNone {
			return host.LayoutResult{}, invalid(fmt.Sprintf("require: %q is not a layout (%s, %s, %s, %s)", k,
				layout.KindKedge, layout.KindTyphoonFlatcar, layout.KindTyphoonFCOS, layout.KindNone))
		}
	}
	out, err := a.exec(ctx, t, execSpec{script: factsScript, limit: 64 << 10})
	if err != nil {
		return host.LayoutResult{}, err
	}
	if out.ExitCode != 0 {
		return host.LayoutResult{}, &typedError{typ: errtype.CommandFailed, msg: fmt.Sprintf("layout of %s: systemctl show exited %d%s", t.Name(), out.ExitCode, tailLine(out.Stderr))}
	}
	facts, err := parseFacts(out.Stdout)
	if err != nil {
		return host.LayoutResult{}, &typedError{typ: errtype.CommandFailed, msg: fmt.Sprintf("layout of %s: %v", t.Name(), err)}
	}
	var l layout.Layout
	var discoverErr error
	err = a.Pool.WithSFTP(ctx, t, func(c *sftp.Client) error {
		l, discoverErr = layout.Discover(facts, sftpReader{c})
		var fe *fileReadError
		if errors.As(discoverErr, &fe) {
			return fe.err
		}
		return nil
	})
	if err != nil {
		return host.LayoutResult{}, a.fileErr(t, "read", "/etc/systemd/system", err)
	}
	if discoverErr != nil {
		// The host's files are there but do not say what Kedge needs:
		// that is the host's layout, not a passing failure.
		l = layout.Layout{Kind: layout.KindUnknown, Why: discoverErr.Error()}
	}
	res := l
	if len(in.Require) > 0 && !slices.Contains(in.Require, l.Kind) {
		return res, &typedError{typ: errtype.UnknownLayout, nonRetryable: true, msg: l.Require(t.Name(), in.Require...).Error()}
	}
	if err := l.CheckNodeName(t.Name(), in.NodeName); err != nil {
		return res, &typedError{typ: errtype.NodeNameMismatch, nonRetryable: true, msg: err.Error()}
	}
	return res, nil
}

// parseFacts reads factsScript's output.
func parseFacts(s string) (layout.Facts, error) {
	f := layout.Facts{Units: map[string]layout.UnitState{}}
	var unit string
	var props map[string]string
	flush := func() error {
		if unit == "" {
			return nil
		}
		st := layout.UnitState{LoadState: props["LoadState"], ActiveState: props["ActiveState"], UnitFileState: props["UnitFileState"],
			FragmentPath: props["FragmentPath"], DropInPaths: strings.Fields(props["DropInPaths"])}
		env, err := layout.SplitWords(props["Environment"])
		if err != nil {
			return fmt.Errorf("%s Environment: %w", unit, err)
		}
		st.Environment = env
		f.Units[unit] = st
		unit = ""
		return nil
	}
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(line, "@unit "):
			if err := flush(); err != nil {
				return f, err
			}
			unit, props = strings.TrimPrefix(line, "@unit "), map[string]string{}
		case line == "@hostname":
			if err := flush(); err != nil {
				return f, err
			}
			if i+1 < len(lines) {
				f.Hostname = strings.TrimSpace(lines[i+1])
			}
			i = len(lines)
		case unit != "":
			if k, v, ok := strings.Cut(line, "="); ok {
				props[k] = v
			}
		}
	}
	if err := flush(); err != nil {
		return f, err
	}
	for _, u := range layout.Units {
		if _, ok := f.Units[u]; !ok {
			return f, fmt.Errorf("systemctl show reported nothing for %s", u)
		}
	}
	if f.Hostname == "" {
		return f, errors.New("no host name")
	}
	return f, nil
}

// sftpReader reads the host's files for layout.Discover.
type sftpReader struct{ c *sftp.Client }

// fileReadError is an SFTP failure other than a missing file: the
// connection's problem, not the layout's.
type fileReadError struct{ err error }

func (e *fileReadError) Error() string { return e.err.Error() }
func (e *fileReadError) Unwrap() error { return e.err }

func (r sftpReader) ReadFile(p string) ([]byte, error) {
	f, err := readIfExists(r.c, p, maxLayoutFile)
	var big *tooBigError
	switch {
	case errors.As(err, &big):
		return nil, fmt.Errorf("%s: %w", p, err)
	case err != nil:
		return nil, &fileReadError{fmt.Errorf("%s: %w", p, err)}
	case f == nil:
		return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	return f.data, nil
}

func (r sftpReader) ReadDir(p string) ([]string, error) {
	fis, err := r.c.ReadDir(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	if err != nil {
		return nil, &fileReadError{fmt.Errorf("%s: %w", p, err)}
	}
	var names []string
	for _, fi := range fis {
		if fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0 {
			names = append(names, fi.Name())
		}
	}
	return names, nil
}
