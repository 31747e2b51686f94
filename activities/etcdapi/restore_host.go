package etcdapi

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/sftp"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"kedge.dev/kedge/actions/etcd"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/target"

	"kedge.dev/kedge/actions/errtype"
)

// Hosts runs the restore's scripts on a controller, as root (the host
// actions' Run: its $KEDGE_OUTPUT lines come back as Outputs).
type Hosts interface {
	Run(ctx context.Context, in host.RunInput) (host.RunResult, error)
}

// Files ships files to a controller over SFTP, as root (the SSH pool).
type Files interface {
	WithSFTP(ctx context.Context, t target.SSH, fn func(*sftp.Client) error) error
}

// A restore token names the restored cluster and the journal on each
// host: what etcd.restore-plan makes, or anything as plain.
var restoreToken = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ownerRE is uid[:gid] or user[:group].
var ownerRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,31})?$`)

// hostPath accepts an absolute, clean path on the host that is not /.
func hostPath(field, p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" || strings.ContainsAny(p, "\x00\n") {
		return invalid(fmt.Sprintf("%s %q is not an absolute, clean path on the host", field, p))
	}
	return nil
}

func checkToken(token string) error {
	if !restoreToken.MatchString(token) {
		return invalid(fmt.Sprintf("token %q: want letters, digits, '.', '_' and '-' (at most 64)", token))
	}
	return nil
}

// hostScript runs script on the host with env and a timeout; a failure
// is the restore's (retried), naming what failed.
func (a *Activities) hostScript(ctx context.Context, t target.SSH, what, script string, env map[string]string, timeout time.Duration) (host.RunResult, error) {
	if a.Hosts == nil {
		return host.RunResult{}, temporal.NewNonRetryableApplicationError("this worker runs no host actions", errtype.EtcdRestoreFailed, nil)
	}
	res, err := a.Hosts.Run(ctx, host.RunInput{Target: t, Script: script, Env: env, Timeout: timeout.String()})
	if err != nil {
		return res, temporal.NewApplicationErrorWithCause(fmt.Sprintf("%s on %s: %v", what, t.Name(), err), errtype.EtcdRestoreFailed, err)
	}
	return res, nil
}

// restoreShell are the shell functions every restore script starts with:
// the journal J of the token, made 0700.
const restoreShell = `set -eu
J="$JOURNAL/$TOKEN"
mkdir -p "$J"
chmod 700 "$JOURNAL" "$J"
`

// stopScript moves the API server's manifest aside into the journal and
// waits for its process to go, then etcd's (its manifest, or its unit
// stopped). A process counts when it runs in the host's network
// namespace, as the control plane does (static pods with the host's
// network, Typhoon's etcd container with --network host): a program of
// that name in a network namespace of its own (a nested cluster, a
// test world's other nodes on one machine) is not this member. A manifest already in the journal was moved by an earlier
// attempt. It prints what it stopped.
const stopScript = restoreShell + `aside() { # component manifest
  if [ -n "$2" ] && [ -e "$2" ]; then
    printf '%s\n' "$2" > "$J/$1.path"
    mv -f "$2" "$J/$1.manifest"
  fi
}
running() { # process: one of this host's (the control plane runs in the host's network namespace; another's is not this member)
  self=$(readlink /proc/self/ns/net)
  for p in $(pgrep -x "$1" 2>/dev/null); do
    [ "$(readlink "/proc/$p/ns/net" 2>/dev/null)" = "$self" ] && return 0
  done
  return 1
}
gone() { # process
  n=0
  while running "$1"; do
    n=$((n + 1))
    if [ "$n" -ge "$WAIT" ]; then
      echo "$1 still runs $WAIT s after it was stopped" >&2
      exit 4
    fi
    sleep 1
  done
  echo "$1"
}
aside kube-apiserver "$API_MANIFEST"
gone kube-apiserver
case "$ETCD_MODE" in
static-pod) aside etcd "$ETCD_MANIFEST" ;;
host-unit) systemctl stop "$ETCD_UNIT" ;;
esac
gone etcd
`

// StopControlPlane stops a controller's API server, then its etcd
// (etcd.stop-control-plane): static pod manifests are moved aside into
// the restore's journal (/var/lib/kedge/restore/TOKEN), so that
// etcd.start-control-plane puts them back; Typhoon's etcd unit is
// stopped. It returns once neither process runs. A second attempt finds
// the manifests in the journal and only waits.
func (a *Activities) StopControlPlane(ctx context.Context, in etcd.StopControlPlaneInput) (etcd.StopControlPlaneResult, error) {
	if err := checkToken(in.Token); err != nil {
		return etcd.StopControlPlaneResult{}, err
	}
	wait := 2 * time.Minute
	if in.Wait != "" {
		d, err := time.ParseDuration(in.Wait)
		if err != nil || d <= 0 {
			return etcd.StopControlPlaneResult{}, invalid(fmt.Sprintf("wait %q is not a positive duration", in.Wait))
		}
		wait = d
	}
	if in.APIServerManifest != "" {
		if err := hostPath("apiServerManifest", in.APIServerManifest); err != nil {
			return etcd.StopControlPlaneResult{}, err
		}
	}
	switch in.EtcdMode {
	case "static-pod":
		if err := hostPath("etcdManifest", in.EtcdManifest); err != nil {
			return etcd.StopControlPlaneResult{}, err
		}
	case "host-unit":
		if !unitName.MatchString(in.EtcdUnit) {
			return etcd.StopControlPlaneResult{}, invalid(fmt.Sprintf("etcdUnit %q is not a unit's name", in.EtcdUnit))
		}
	default:
		return etcd.StopControlPlaneResult{}, invalid(fmt.Sprintf("etcdMode %q: want static-pod or host-unit", in.EtcdMode))
	}
	env := map[string]string{"JOURNAL": restoreJournal, "TOKEN": in.Token, "API_MANIFEST": in.APIServerManifest,
		"ETCD_MODE": in.EtcdMode, "ETCD_MANIFEST": in.EtcdManifest, "ETCD_UNIT": in.EtcdUnit, "WAIT": strconv.Itoa(int(wait.Seconds()))}
	out, err := a.hostScript(ctx, in.Target, "stop the control plane", stopScript, env, 2*wait+time.Minute)
	if err != nil {
		return etcd.StopControlPlaneResult{}, err
	}
	return etcd.StopControlPlaneResult{Stopped: strings.Fields(out.Stdout)}, nil
}

var unitName = regexp.MustCompile(`^[A-Za-z0-9:_.@-]{1,200}\.service$`)

// startScript puts a manifest moved aside back (copied beside it under a
// name the kubelet skips, then renamed), or starts etcd's unit without
// waiting: a member waits for its peers.
const startScript = restoreShell + `echo "startedAt=$(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$KEDGE_OUTPUT"
if [ -e "$J/$COMPONENT.manifest" ]; then
  p=$(cat "$J/$COMPONENT.path")
  tmp="$(dirname "$p")/.$(basename "$p").kedge-restore"
  cp -p "$J/$COMPONENT.manifest" "$tmp"
  mv -f "$tmp" "$p"
  rm -f "$J/$COMPONENT.manifest"
  echo "$COMPONENT"
elif [ "$COMPONENT" = etcd ] && [ "$ETCD_MODE" = host-unit ]; then
  systemctl start --no-block "$ETCD_UNIT"
  echo etcd
fi
`

// StartControlPlane starts etcd or the API server again
// (etcd.start-control-plane): the manifest etcd.stop-control-plane moved
// aside is put back, or Typhoon's etcd unit is started. A manifest
// already back is left.
func (a *Activities) StartControlPlane(ctx context.Context, in etcd.StartControlPlaneInput) (etcd.StartControlPlaneResult, error) {
	if err := checkToken(in.Token); err != nil {
		return etcd.StartControlPlaneResult{}, err
	}
	switch {
	case in.Component != "etcd" && in.Component != "kube-apiserver":
		return etcd.StartControlPlaneResult{}, invalid(fmt.Sprintf("component %q: want etcd or kube-apiserver", in.Component))
	case in.Component == "etcd" && in.EtcdMode == "host-unit" && !unitName.MatchString(in.EtcdUnit):
		return etcd.StartControlPlaneResult{}, invalid(fmt.Sprintf("etcdUnit %q is not a unit's name", in.EtcdUnit))
	}
	env := map[string]string{"JOURNAL": restoreJournal, "TOKEN": in.Token, "COMPONENT": in.Component, "ETCD_MODE": in.EtcdMode, "ETCD_UNIT": in.EtcdUnit}
	out, err := a.hostScript(ctx, in.Target, "start "+in.Component, startScript, env, 2*time.Minute)
	if err != nil {
		return etcd.StartControlPlaneResult{}, err
	}
	return etcd.StartControlPlaneResult{Started: append([]string{}, strings.Fields(out.Stdout)...), StartedAt: out.Outputs["startedAt"]}, nil
}

// memberStateScript says whether the member was restored already with
// this token, and how; else it readies an empty staging directory
// beside the data directory (the restored one of an attempt that did not
// finish is removed: it never ran).
const memberStateScript = restoreShell + `report() {
  { echo "installed=$1"
    echo "kept=$(cat "$J/$NAME.kept" 2>/dev/null || true)"
    echo "owner=$(cat "$J/$NAME.owner" 2>/dev/null || true)"
    echo "mode=$(cat "$J/$NAME.mode" 2>/dev/null || true)"; } >> "$KEDGE_OUTPUT"
}
if [ -e "$J/$NAME.installed" ]; then report yes; exit 0; fi
rm -rf "$STAGING"
mkdir -p "$STAGING"
chmod 700 "$STAGING"
report no
`

// installScript moves the old data directory aside (kept; its owner and
// mode noted in the journal), gives the staged one that owner and mode
// and moves it into place. Each move is journaled, so an attempt cut
// anywhere is finished by the next: the old directory is moved once, and
// a data directory that appears after that (something started etcd) is
// refused, never replaced.
const installScript = restoreShell + `if [ ! -e "$J/$NAME.installed" ]; then
  if [ ! -e "$J/$NAME.moved" ]; then
    if [ -d "$DATA" ]; then
      stat -c '%u:%g' "$DATA" > "$J/$NAME.owner"
      stat -c '%a' "$DATA" > "$J/$NAME.mode"
    else
      printf '%s\n' "$OWNER" > "$J/$NAME.owner"
      echo 700 > "$J/$NAME.mode"
    fi
    if [ -e "$DATA" ] || [ -L "$DATA" ]; then
      mv "$DATA" "$KEPT"
      printf '%s\n' "$KEPT" > "$J/$NAME.kept"
    else
      : > "$J/$NAME.kept"
    fi
    touch "$J/$NAME.moved"
  fi
  if [ -d "$STAGING" ]; then
    if [ -e "$DATA" ]; then
      echo "$DATA appeared after the old data directory was moved aside: something started etcd; not replaced" >&2
      exit 3
    fi
    chown -R "$(cat "$J/$NAME.owner")" "$STAGING"
    chmod "$(cat "$J/$NAME.mode")" "$STAGING"
    mv "$STAGING" "$DATA"
  fi
  test -d "$DATA/member" || { echo "$DATA holds no restored member" >&2; exit 3; }
  touch "$J/$NAME.installed"
fi
{ echo "kept=$(cat "$J/$NAME.kept")"
  echo "owner=$(cat "$J/$NAME.owner")"
  echo "mode=$(cat "$J/$NAME.mode")"; } >> "$KEDGE_OUTPUT"
`

// The restore's phase names, in its heartbeat.
const phaseShip = "ship"

// RestoreMember restores one member's data directory from the snapshot
// (etcd.restore-member), once per token: the sealed snapshot is streamed
// from the destination through the codec key's seal into a file on the
// worker and checked as etcd.restore-drill checks it, restored there with
// etcd's own code (etcdutl) as the member of the new cluster (its name,
// peer URL, the initial cluster, the new token), shipped over SFTP into a
// directory beside the data directory, and moved into place; the old data
// directory is moved aside and kept. Every step is journaled on the host
// (/var/lib/kedge/restore/TOKEN): an attempt after a worker died finishes
// the job, and one that finds the member restored changes nothing.
func (a *Activities) RestoreMember(ctx context.Context, in etcd.RestoreMemberInput) (etcd.RestoreMemberResult, error) {
	if err := checkRestoreMember(in); err != nil {
		return etcd.RestoreMemberResult{}, err
	}
	owner := in.Owner
	if owner == "" {
		owner = "0:0"
	}
	env := map[string]string{"JOURNAL": restoreJournal, "TOKEN": in.Token, "NAME": in.Name, "DATA": in.DataDir,
		"STAGING": in.DataDir + ".restoring-" + in.Token, "KEPT": in.DataDir + ".before-" + in.Token, "OWNER": owner}
	res := etcd.RestoreMemberResult{DataDir: in.DataDir}
	st, err := a.hostScript(ctx, in.Target, "read the restore's journal", memberStateScript, env, 2*time.Minute)
	if err != nil {
		return res, err
	}
	if st.Outputs["installed"] == "yes" {
		res.Kept, res.Owner, res.Mode = st.Outputs["kept"], st.Outputs["owner"], st.Outputs["mode"]
		return res, nil
	}
	cluster, dest, err := a.checkDrillInput(etcd.RestoreDrillInput{Vault: in.Vault, Destination: in.Destination, Snapshot: in.Snapshot})
	if err != nil {
		return res, err
	}
	if a.Keys == nil || a.Files == nil {
		return res, temporal.NewNonRetryableApplicationError("the worker has no codec key to open the snapshot with, or no SSH pool", errtype.NoSealKey, nil)
	}
	work, err := newScratch(drillTempDir, "restore")
	if err != nil {
		return res, temporal.NewApplicationErrorWithCause("a directory for the restore", errtype.EtcdRestoreFailed, err)
	}
	defer work.remove()
	dir := work.dir
	prog := startDrillProgress(ctx, in.Snapshot, 0)
	defer prog.stop()
	if err := a.restoreLocally(ctx, in, cluster, dest, dir, prog); err != nil {
		return res, asRestoreError(err)
	}
	n, err := a.ship(ctx, in.Target, filepath.Join(dir, "data"), env["STAGING"])
	if err != nil {
		return res, temporal.NewApplicationErrorWithCause(fmt.Sprintf("ship the restored data directory to %s: %v", in.Target.Name(), err), errtype.EtcdRestoreFailed, err)
	}
	if afterShip != nil {
		if err := afterShip(); err != nil {
			return res, err
		}
	}
	done, err := a.hostScript(ctx, in.Target, "put the restored data directory in place", installScript, env, 2*time.Minute)
	if err != nil {
		return res, err
	}
	res.Restored, res.Shipped = true, n
	res.Kept, res.Owner, res.Mode = done.Outputs["kept"], done.Outputs["owner"], done.Outputs["mode"]
	return res, nil
}

// revisionBump is added to the restored revision, the same on every
// member, and the revisions before it marked compacted, as Kubernetes
// asks of a restore: a client or an API server's cache that saw a
// revision after the snapshot's never sees those numbers again for other
// writes, and its watch is told to list again.
const revisionBump = 1_000_000_000

// afterShip, when set, runs between the shipping and the install; its
// error ends the attempt there (tests cut an attempt so).
var afterShip func() error

// restoreJournal is api.RestoreJournal (a variable for tests).
var restoreJournal = etcd.RestoreJournal

func checkRestoreMember(in etcd.RestoreMemberInput) error {
	if err := checkToken(in.Token); err != nil {
		return err
	}
	if err := hostPath("dataDir", in.DataDir); err != nil {
		return err
	}
	if in.Owner != "" && !ownerRE.MatchString(in.Owner) {
		return invalid(fmt.Sprintf("owner %q: want uid:gid or user:group", in.Owner))
	}
	if !restoreToken.MatchString(in.Name) {
		return invalid(fmt.Sprintf("name %q is not a member's name", in.Name))
	}
	for _, m := range strings.Split(in.InitialCluster, ",") {
		if name, url, _ := strings.Cut(m, "="); name == in.Name && url == in.PeerURL {
			return nil
		}
	}
	return invalid(fmt.Sprintf("initialCluster %q does not name %s at %s", in.InitialCluster, in.Name, in.PeerURL))
}

// restoreLocally fetches and checks the snapshot into dir, and restores
// it with etcdutl into dir/data as the member of the new cluster.
func (a *Activities) restoreLocally(ctx context.Context, in etcd.RestoreMemberInput, cluster string, dest etcd.Destination, dir string, prog *drillProgress) error {
	store, err := openStore(ctx, dest)
	if err != nil {
		return err
	}
	snap, err := pickDrillSnapshot(ctx, store, cluster, in.Snapshot)
	if err != nil {
		return err
	}
	m, err := readManifest(ctx, store, cluster, snap.name)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "snapshot.db")
	if err := a.fetchSnapshot(ctx, store, snap, m, file, prog); err != nil {
		return err
	}
	prog.setPhase(phaseRestore)
	if err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{SnapshotPath: file, Name: in.Name, OutputDataDir: filepath.Join(dir, "data"),
		PeerURLs: []string{in.PeerURL}, InitialCluster: in.InitialCluster, InitialClusterToken: in.Token,
		RevisionBump: revisionBump, MarkCompacted: true}); err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("etcd's restore of %s as %s: %v", snap.name.key, in.Name, err), errtype.EtcdRestoreFailed, err)
	}
	_ = os.Remove(file)
	prog.setPhase(phaseShip)
	return nil
}

// ship copies the local directory tree into remote (made empty by
// memberStateScript) over SFTP, one file at a time, modes kept; it
// returns the bytes shipped.
func (a *Activities) ship(ctx context.Context, t target.SSH, local, remote string) (int64, error) {
	var total int64
	err := a.Files.WithSFTP(ctx, t, func(c *sftp.Client) error {
		total = 0
		return filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rel, _ := filepath.Rel(local, p)
			dst := path.Join(remote, filepath.ToSlash(rel))
			info, err := d.Info()
			if err != nil {
				return err
			}
			if d.IsDir() {
				if rel != "." {
					if err := c.Mkdir(dst); err != nil {
						return fmt.Errorf("mkdir %s: %w", dst, err)
					}
				}
				return c.Chmod(dst, info.Mode().Perm())
			}
			if !info.Mode().IsRegular() {
				return fmt.Errorf("%s is not a regular file", p)
			}
			n, err := shipFile(c, p, dst, info.Mode().Perm())
			total += n
			return err
		})
	})
	return total, err
}

func shipFile(c *sftp.Client, src, dst string, mode fs.FileMode) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := c.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", dst, err)
	}
	if err := out.Chmod(mode); err != nil {
		_ = out.Close()
		return 0, fmt.Errorf("chmod %s: %w", dst, err)
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("write %s: %w", dst, err)
	}
	return n, nil
}
