package sshhost

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"

	"github.com/pkg/sftp"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"

	"kedge.dev/kedge/actions/target"
)

// CheckReadable checks that each process can read its files as the user it
// runs as (host.check-readable): each file is opened for reading under
// that uid, gid and supplementary groups (setpriv, util-linux), so the
// modes and owners of the file and of every directory above it count as
// they will for the process. Any file one cannot read fails the action,
// not retried, naming the file, its owner and mode, the process and its
// uid: run before a restart, it stops the restart of a process that
// would not start.
func (a *Activities) CheckReadable(ctx context.Context, in host.CheckReadableInput) (host.CheckReadableResult, error) {
	res, err := a.checkReadable(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) checkReadable(ctx context.Context, in host.CheckReadableInput) (host.CheckReadableResult, error) {
	script, err := readableScript(in.Files)
	if err != nil {
		return host.CheckReadableResult{}, err
	}
	var res host.CheckReadableResult
	if len(in.Files) == 0 {
		return res, nil
	}
	t := in.Target
	out, err := a.exec(ctx, t, execSpec{script: script, timeout: bundleTimeout, limit: 1 << 16,
		details: func(_, _ *tailBuffer) any { return map[string]any{"files": len(in.Files)} }})
	if err != nil {
		return res, err
	}
	if out.ExitCode != 0 {
		// 3: no setpriv, which no retry brings.
		return res, &typedError{typ: errtype.CommandFailed, nonRetryable: out.ExitCode == 3,
			msg: fmt.Sprintf("check files are readable on %s: exit status %d%s", t.Name(), out.ExitCode, tailLine(out.Stderr))}
	}
	var bad []string
	for line := range strings.Lines(out.Stdout) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) < 4 {
			continue
		}
		i := 0
		if _, err := fmt.Sscan(f[1], &i); err != nil || i < 0 || i >= len(in.Files) {
			continue
		}
		r := in.Files[i]
		who := fmt.Sprintf("%s (uid %s gid %s", r.Reader, f[2], f[3])
		if len(r.Groups) > 0 {
			who += " groups " + strings.Join(r.Groups, ",")
		}
		who += ")"
		switch f[0] {
		case "ok":
			res.Checked = append(res.Checked, r.Path+": "+who)
		case "unreadable":
			msg := fmt.Sprintf("%s cannot read %s (%s)", who, r.Path, strings.Join(f[4:], " "))
			if r.From != "" {
				msg += "; it runs so per " + r.From
			}
			bad = append(bad, msg)
		default: // "error": who the process is could not be told or taken
			bad = append(bad, fmt.Sprintf("%s: %s: cannot check as %s: %s", r.Path, r.Reader, r.User, strings.Join(f[4:], " ")))
		}
	}
	if len(bad) > 0 {
		return res, &typedError{typ: errtype.Unreadable, nonRetryable: true,
			msg: fmt.Sprintf("on %s, %s: it would not start on them", t.Name(), strings.Join(bad, "; "))}
	}
	if len(res.Checked) != len(in.Files) {
		return res, &typedError{typ: errtype.CommandFailed,
			msg: fmt.Sprintf("check files are readable on %s: %d of %d answered%s", t.Name(), len(res.Checked), len(in.Files), tailLine(out.Stderr))}
	}
	return res, nil
}

// idSpec is a user or group as a check takes it: a name or a number.
var idSpec = regexp.MustCompile(`^[A-Za-z0-9_][-A-Za-z0-9_.]*$`)

// readableScript checks each file as its reader. Per file it prints one
// tab-separated line: ok|unreadable|error, the file's index, the uid and
// gid used, then what explains it (the file's owner and mode, or the
// directory the reader cannot enter, or the error).
func readableScript(files []host.FileReader) (string, error) {
	var b strings.Builder
	b.WriteString(`set -u
if ! command -v setpriv >/dev/null 2>&1; then
  echo "no setpriv (util-linux) on this host: cannot check who can read what" >&2
  exit 3
fi
uid_of() { case $1 in *[!0-9]*) id -u -- "$1" 2>/dev/null ;; *) echo "$1" ;; esac; }
gid_of() { case $1 in *[!0-9]*) getent group -- "$1" 2>/dev/null | cut -d: -f3 ;; *) echo "$1" ;; esac; }
# as UID GID GROUPS TEST PATH: the test as that user, "yes" or "no"
as() {
  if [ -n "$3" ]; then sg="--groups=$3"; else sg=--clear-groups; fi
  setpriv --reuid="$1" --regid="$2" "$sg" -- sh -c 'if test "$1" "$2"; then echo yes; else echo no; fi' sh "$4" "$5" 2>&1
}
check() {
  i=$1 p=$2
  u=$(uid_of "$3")
  if [ -z "$u" ]; then printf 'error\t%s\t?\t?\tno user %s on this host\n' "$i" "$3"; return; fi
  if [ -n "$4" ]; then g=$(gid_of "$4"); else g=$(id -g -- "$u" 2>/dev/null || echo 0); fi
  if [ -z "$g" ]; then printf 'error\t%s\t%s\t?\tno group %s on this host\n' "$i" "$u" "$4"; return; fi
  gs=
  for x in $5; do
    y=$(gid_of "$x")
    if [ -z "$y" ]; then printf 'error\t%s\t%s\t%s\tno group %s on this host\n' "$i" "$u" "$g" "$x"; return; fi
    gs="${gs:+$gs,}$y"
  done
  r=$(as "$u" "$g" "$gs" -r "$p")
  case $r in
  yes) printf 'ok\t%s\t%s\t%s\n' "$i" "$u" "$g"; return ;;
  no) ;;
  *) printf 'error\t%s\t%s\t%s\t%s\n' "$i" "$u" "$g" "$(echo $r)"; return ;;
  esac
  if [ ! -e "$p" ]; then printf 'unreadable\t%s\t%s\t%s\tit does not exist\n' "$i" "$u" "$g"; return; fi
  # The first directory on the way it cannot enter, else the file.
  d=/
  for c in $(dirname "$p" | tr / ' '); do
    d="${d%/}/$c"
    if [ "$(as "$u" "$g" "$gs" -x "$d")" != yes ]; then
      printf 'unreadable\t%s\t%s\t%s\tcannot enter %s: %s\n' "$i" "$u" "$g" "$d" "$(stat -c '%U:%G %a' "$d")"
      return
    fi
  done
  printf 'unreadable\t%s\t%s\t%s\t%s\n' "$i" "$u" "$g" "$(stat -L -c '%U:%G %a' "$p")"
}
`)
	for i, f := range files {
		if err := checkPath(f.Path); err != nil {
			return "", err
		}
		if strings.ContainsAny(f.Path, bundleUnsafe) {
			return "", invalid(fmt.Sprintf("files[%d].path %q: no spaces, quotes, glob or shell characters", i, f.Path))
		}
		if !idSpec.MatchString(f.User) {
			return "", invalid(fmt.Sprintf("files[%d].user %q is not a user name or uid", i, f.User))
		}
		if f.Group != "" && !idSpec.MatchString(f.Group) {
			return "", invalid(fmt.Sprintf("files[%d].group %q is not a group name or gid", i, f.Group))
		}
		for _, g := range f.Groups {
			if !idSpec.MatchString(g) {
				return "", invalid(fmt.Sprintf("files[%d].groups: %q is not a group name or gid", i, g))
			}
		}
		fmt.Fprintf(&b, "check %d '%s' '%s' '%s' '%s'\n", i, f.Path, f.User, f.Group, strings.Join(f.Groups, " "))
	}
	return b.String(), nil
}

// Stat reads a file's mode and owner over SFTP, following symbolic links;
// a missing file is no error (Exists false).
func (a *Activities) Stat(ctx context.Context, t target.SSH, p string) (host.FileStat, error) {
	if err := checkPath(p); err != nil {
		return host.FileStat{}, toTemporal(err)
	}
	var st host.FileStat
	err := a.Pool.WithSFTP(ctx, t, func(c *sftp.Client) error {
		fi, err := c.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			st = host.FileStat{}
			return nil
		}
		if err != nil {
			return err
		}
		st = host.FileStat{Exists: true, Mode: fmt.Sprintf("%04o", unixMode(fi))}
		if s, ok := fi.Sys().(*sftp.FileStat); ok {
			st.UID, st.GID = s.UID, s.GID
		}
		return nil
	})
	if err != nil {
		return st, toTemporal(a.fileErr(t, "stat", p, err))
	}
	return st, nil
}

// RealPath is p with every symbolic link in it resolved, over SFTP: the
// file a write must replace to keep a link (the kubelet's
// kubelet-client-current.pem, a link its certificate store rotates and
// refuses to find a file in place of) pointing where it did.
func (a *Activities) RealPath(ctx context.Context, t target.SSH, p string) (string, error) {
	if err := checkPath(p); err != nil {
		return "", toTemporal(err)
	}
	var out string
	err := a.Pool.WithSFTP(ctx, t, func(c *sftp.Client) error {
		r, err := c.RealPath(p)
		out = r
		return err
	})
	if err != nil {
		return "", toTemporal(a.fileErr(t, "resolve", p, err))
	}
	if err := checkPath(out); err != nil {
		return "", toTemporal(err)
	}
	return out, nil
}

// maxListed bounds what ListFiles returns.
const maxListed = 2000

// ListFiles lists the regular files under dir, walked whole, as paths
// relative to it ("a.yaml", "network/b.yaml"), sorted; none when dir is
// not there. Refused past maxListed files.
func (a *Activities) ListFiles(ctx context.Context, t target.SSH, dir string) ([]string, error) {
	if err := checkPath(dir); err != nil {
		return nil, toTemporal(err)
	}
	var out []string
	err := a.Pool.WithSFTP(ctx, t, func(c *sftp.Client) error {
		out = nil
		w := c.Walk(dir)
		for w.Step() {
			if err := w.Err(); err != nil {
				if errors.Is(err, fs.ErrNotExist) && w.Path() == dir {
					return nil
				}
				return err
			}
			if !w.Stat().Mode().IsRegular() {
				continue
			}
			rel, ok := strings.CutPrefix(w.Path(), dir+"/")
			if !ok {
				return fmt.Errorf("walk of %s gave %s", dir, w.Path())
			}
			if out = append(out, rel); len(out) > maxListed {
				return &typedError{typ: errtype.InvalidInput, nonRetryable: true, msg: fmt.Sprintf("%s on %s holds more than %d files", dir, t.Name(), maxListed)}
			}
		}
		return nil
	})
	if err != nil {
		return nil, toTemporal(a.fileErr(t, "list", dir, err))
	}
	slices.Sort(out)
	return out, nil
}
