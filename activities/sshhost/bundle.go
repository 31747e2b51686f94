package sshhost

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
)

// bundleTimeout bounds the remote unpacking by default.
const bundleTimeout = 2 * time.Minute

// InstallBundle installs a set of files on a host all or none
// (host.install-bundle; seed 001 ships a controller's assets so). The
// files travel as ONE tar file written atomically; on the host every file
// is first staged beside its target (same file system), and only when
// all are staged are they renamed into place, each rename atomic. A failure
// before that leaves every target untouched. Files whose content and mode
// already match count as unchanged; when all match nothing is done.
func (a *Activities) InstallBundle(ctx context.Context, in host.InstallBundleInput) (host.InstallBundleResult, error) {
	res, err := a.installBundle(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) installBundle(ctx context.Context, in host.InstallBundleInput) (host.InstallBundleResult, error) {
	archive, files, err := buildBundle(in.Files)
	if err != nil {
		return host.InstallBundleResult{}, err
	}
	timeout := bundleTimeout
	if in.Timeout != "" {
		if timeout, err = time.ParseDuration(in.Timeout); err != nil || timeout <= 0 {
			return host.InstallBundleResult{}, invalid(fmt.Sprintf("timeout %q is not a positive duration", in.Timeout))
		}
	}
	sum := sha(archive)
	res := host.InstallBundleResult{SHA256: sum, Files: files}
	dir := path.Join(a.backupDir(), "bundle-"+sum[:16])
	bundle := dir + ".tar"
	t := in.Target
	prog := bundleProgress{Bundle: sum, Files: len(files)}
	if err := a.uploadBundle(ctx, t, bundle, archive, prog); err != nil {
		return res, a.fileErr(t, "upload the bundle to", bundle, err)
	}
	prog.Uploaded = int64(len(archive))
	out, err := a.exec(ctx, t, execSpec{script: installScript(bundle, dir, files, owners(in.Files)), timeout: timeout, limit: 1 << 16,
		details: func(_, _ *tailBuffer) any { return prog }})
	if err != nil {
		return res, err
	}
	if out.ExitCode != 0 {
		return res, &typedError{typ: errtype.CommandFailed,
			msg: fmt.Sprintf("install bundle %s on %s: exit status %d%s (no file was changed)", sum[:16], t.Name(), out.ExitCode, tailLine(out.Stderr))}
	}
	res.Changed = out.Outputs["changed"] == "true"
	if res.Changed {
		res.Backup = dir
	}
	res.Created = strings.Fields(out.Outputs["created"])
	return res, nil
}

// buildBundle validates the files and tars them (paths relative to /).
func buildBundle(files []host.BundleFile) ([]byte, []string, error) {
	if len(files) == 0 {
		return nil, nil, invalid("files: a bundle needs at least one file")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var paths []string
	for i, f := range files {
		if err := checkPath(f.Path); err != nil {
			return nil, nil, invalid(fmt.Sprintf("files[%d].path: %v", i, err))
		}
		if strings.ContainsAny(f.Path, bundleUnsafe) {
			return nil, nil, invalid(fmt.Sprintf("files[%d].path %q: no spaces, quotes, glob or shell characters", i, f.Path))
		}
		if slices.Contains(paths, f.Path) {
			return nil, nil, invalid(fmt.Sprintf("files[%d].path %s is given twice", i, f.Path))
		}
		mode, err := parseMode(f.Mode)
		if err != nil {
			return nil, nil, invalid(fmt.Sprintf("files[%d].mode: %v", i, err))
		}
		if f.Owner != "" && !ownerSpec.MatchString(f.Owner) {
			return nil, nil, invalid(fmt.Sprintf("files[%d].owner %q is not user[:group] (names or numbers)", i, f.Owner))
		}
		paths = append(paths, f.Path)
		hdr := &tar.Header{Name: strings.TrimPrefix(f.Path, "/"), Mode: int64(mode), Size: int64(len(f.Content)),
			Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, nil, err
		}
		if _, err := tw.Write([]byte(f.Content)); err != nil {
			return nil, nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), paths, nil
}

// bundleUnsafe are the characters a bundle's paths may not hold: the
// scripts split path lists on spaces, so no whitespace, quote, shell or
// glob character may be in one.
const bundleUnsafe = " \t\n'\"$`\\*?[]"

// ownerSpec is a file owner a bundle may set: user[:group], each a name
// or a number.
var ownerSpec = regexp.MustCompile(`^[A-Za-z0-9_][-A-Za-z0-9_.]*(:[A-Za-z0-9_][-A-Za-z0-9_.]*)?$`)

// owners maps each file that names one to its owner.
func owners(files []host.BundleFile) map[string]string {
	m := map[string]string{}
	for _, f := range files {
		if f.Owner != "" {
			m[f.Path] = f.Owner
		}
	}
	return m
}

// installScript unpacks bundle into dir/new, stages each changed file as
// DIR/.NAME.kedge-new, then renames them all into place, keeping the previous
// files under dir/old. A replaced file keeps its owner and group; a created
// one gets its owner from owners, when named there. It reports changed=
// and created= on $KEDGE_OUTPUT.
func installScript(bundle, dir string, files []string, owners map[string]string) string {
	var b strings.Builder
	// -f: the path lists are split on spaces, never globbed.
	fmt.Fprintf(&b, "set -euf\numask 077\nB=%s\nD=%s\nFILES='%s'\n", bundle, dir, strings.Join(files, " "))
	// Paths and owners hold no quote nor shell character (buildBundle).
	b.WriteString("owner() {\n  case $1 in\n")
	for _, p := range files {
		if o := owners[p]; o != "" {
			fmt.Fprintf(&b, "  '%s') echo '%s' ;;\n", p, o)
		}
	}
	b.WriteString("  esac\n}\n")
	b.WriteString(`rm -rf "$D/new"
mkdir -p "$D/new" "$D/old"
tar -xpf "$B" -C "$D/new" --no-same-owner
same() { [ -f "$2" ] && cmp -s "$1" "$2" && [ "$(stat -c %a "$1")" = "$(stat -c %a "$2")" ]; }
staged=""
# Staged as a dot file: a kubelet reads every other file in its static
# pod directory as a manifest.
stage() { printf '%s/.%s.kedge-new' "$(dirname "$1")" "$(basename "$1")"; }
cleanup() { for p in $staged; do rm -f "$(stage "$p")"; done; }
trap cleanup EXIT
changed=""
for p in $FILES; do
  if same "$D/new$p" "$p"; then continue; fi
  mkdir -p "$(dirname "$p")"
  cp -p "$D/new$p" "$(stage "$p")"
  # A replaced file keeps its owner and group (etcd's certificates belong
  # to etcd); a created one gets the owner the bundle names.
  if [ -e "$p" ]; then chown --reference="$p" "$(stage "$p")"
  elif o=$(owner "$p") && [ -n "$o" ]; then chown "$o" "$(stage "$p")"; fi
  staged="$staged $p"
  changed="$changed $p"
done
created=""
for p in $changed; do
  if [ -e "$p" ]; then
    mkdir -p "$D/old$(dirname "$p")"
    cp -p "$p" "$D/old$p"
  else
    created="$created $p"
  fi
done
for p in $changed; do mv -f "$(stage "$p")" "$p"; done
staged=""
rm -rf "$D/new" "$B"
if [ -n "$changed" ]; then echo changed=true >>"$KEDGE_OUTPUT"; else echo changed=false >>"$KEDGE_OUTPUT"; fi
echo "created=$created" >>"$KEDGE_OUTPUT"
`)
	return b.String()
}

// RestoreBundle undoes a host.install-bundle (host.restore-bundle): the
// replaced files come back from the backup, the created ones are removed.
func (a *Activities) RestoreBundle(ctx context.Context, in host.RestoreBundleInput) (host.RestoreBundleResult, error) {
	res, err := a.restoreBundle(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) restoreBundle(ctx context.Context, in host.RestoreBundleInput) (host.RestoreBundleResult, error) {
	var res host.RestoreBundleResult
	if in.Changed != nil && !*in.Changed {
		return res, nil
	}
	for _, p := range append(slices.Clone(in.Files), in.Created...) {
		if err := checkPath(p); err != nil {
			return res, err
		}
		if strings.ContainsAny(p, bundleUnsafe) {
			return res, invalid(fmt.Sprintf("path %q cannot be restored", p))
		}
	}
	if climbs(in.Backup) {
		return res, climbsError("backup", in.Backup)
	}
	if in.Backup != "" && (!strings.HasPrefix(in.Backup, a.backupDir()+"/bundle-") || strings.ContainsAny(in.Backup, " '\"$`\\")) {
		return res, invalid(fmt.Sprintf("backup %q is not a bundle backup", in.Backup))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "set -euf\nD='%s'\nr=''\nm=''\n", in.Backup)
	for _, p := range in.Files {
		if in.Backup != "" {
			staged := path.Join(path.Dir(p), "."+path.Base(p)+".kedge-new")
			fmt.Fprintf(&b, "if [ -e \"$D/old%s\" ]; then cp -p \"$D/old%s\" '%s'; mv -f '%s' '%s'; r=\"$r %s\"; fi\n", p, p, staged, staged, p, p)
		}
	}
	for _, p := range in.Created {
		fmt.Fprintf(&b, "if [ -e '%s' ]; then rm -f '%s'; m=\"$m %s\"; fi\n", p, p, p)
	}
	b.WriteString("echo \"restored=$r\" >>\"$KEDGE_OUTPUT\"\necho \"removed=$m\" >>\"$KEDGE_OUTPUT\"\n")
	t := in.Target
	out, err := a.exec(ctx, t, execSpec{script: b.String(), timeout: bundleTimeout, limit: 1 << 16,
		details: func(_, _ *tailBuffer) any { return nil }})
	if err != nil {
		return res, err
	}
	if out.ExitCode != 0 {
		return res, &typedError{typ: errtype.CommandFailed, msg: fmt.Sprintf("restore bundle on %s: exit status %d%s", t.Name(), out.ExitCode, tailLine(out.Stderr))}
	}
	res.Restored = strings.Fields(out.Outputs["restored"])
	res.Removed = strings.Fields(out.Outputs["removed"])
	return res, nil
}
