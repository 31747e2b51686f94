package etcdapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/target"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/etcd"
)

// A restore is refused while a majority of the members answers healthy
// (for itself, with a leader); once most are gone, or none has a leader,
// it may go on.
func TestQuorumLostRefusesWhileAMajorityIsHealthy(t *testing.T) {
	fakes, ca := threeMembers(t, "12")
	a := &Activities{Vault: clientPair(t), Timeout: 2 * time.Second}
	var all []string
	for _, f := range fakes {
		all = append(all, f.srv.URL)
	}
	in := etcd.QuorumLostInput{Endpoints: all, CACert: ca, Issuer: "etcd"}
	var ae *temporal.ApplicationError
	_, err := a.QuorumLost(context.Background(), in)
	if !errors.As(err, &ae) || !errtype.Is(err, errtype.EtcdMajorityHealthy) || !ae.NonRetryable() ||
		!strings.Contains(err.Error(), "a restore while a majority is healthy") || !strings.Contains(err.Error(), "3 of etcd's 3 members answer healthy (c1, c2, c3)") {
		t.Fatalf("every member healthy: %v", err)
	}
	// Asked for a rollback (an upgrade taken back to its snapshot): a
	// healthy etcd is no refusal.
	rollback := in
	rollback.Rollback = true
	if res, err := a.QuorumLost(context.Background(), rollback); err != nil || len(res.Healthy) != 3 || res.Quorum != 2 {
		t.Fatalf("a rollback over a healthy etcd: %+v %v", res, err)
	}
	fakes[2].srv.Close()
	if _, err = a.QuorumLost(context.Background(), in); !errtype.Is(err, errtype.EtcdMajorityHealthy) ||
		!strings.Contains(err.Error(), "2 of etcd's 3 members answer healthy (c1, c2)") || !strings.Contains(err.Error(), "without c3; replace a lost controller with controller-replace") {
		t.Fatalf("two of three healthy: %v", err)
	}
	fakes[1].srv.Close()
	res, err := a.QuorumLost(context.Background(), in)
	if err != nil || !slices.Equal(res.Members, []string{"c1", "c2", "c3"}) || !slices.Equal(res.Healthy, []string{"c1"}) || res.Quorum != 2 {
		t.Fatalf("one of three healthy: %+v %v", res, err)
	}
	fakes[0].srv.Close()
	res, err = a.QuorumLost(context.Background(), in)
	if err != nil || !slices.Equal(res.Members, all) || len(res.Healthy) != 0 || res.Quorum != 2 {
		t.Fatalf("none answering: %+v %v", res, err)
	}
}

// Members that answer but know no leader are not healthy.
func TestQuorumLostWithoutALeader(t *testing.T) {
	fakes, ca := threeMembers(t, "0")
	a := &Activities{Vault: clientPair(t), Timeout: 2 * time.Second}
	res, err := a.QuorumLost(context.Background(), etcd.QuorumLostInput{Endpoints: []string{fakes[0].srv.URL}, CACert: ca, Issuer: "etcd"})
	if err != nil || len(res.Healthy) != 0 || len(res.Members) != 3 {
		t.Fatalf("no leader: %+v %v", res, err)
	}
}

// etcd.restore-plan reads the snapshot's manifest, opens it with the
// codec key, and makes a token; a snapshot sealed with a key the worker
// does not hold is refused.
func TestRestorePlan(t *testing.T) {
	w := newDrillWorld(t)
	in := etcd.RestorePlanInput{Vault: target.Vault{Cluster: "prod"}, Destination: "local", Snapshot: "latest"}
	res, err := w.a.RestorePlan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Snapshot != w.newest || res.Revision != w.newestManifest.Revision || res.Size != w.newestManifest.Size || res.KeyID != w.newestManifest.KeyID ||
		!strings.HasPrefix(res.Token, "kedge-restore-") || res.AgeSeconds < 3500 || !slices.Equal(res.Members, []string{"source"}) {
		t.Errorf("the newest: %+v", res)
	}
	again, _ := w.a.RestorePlan(context.Background(), in)
	if again.Token == res.Token {
		t.Error("two plans made the same token")
	}
	in.Snapshot = filepath.Base(w.older)
	if res, err := w.a.RestorePlan(context.Background(), in); err != nil || res.Snapshot != w.older {
		t.Errorf("the older by name: %+v %v", res, err)
	}
	other := &Activities{Keys: testKeys(t), Destinations: w.a.Destinations}
	var ae *temporal.ApplicationError
	if _, err := other.RestorePlan(context.Background(), in); !errors.As(err, &ae) || !errtype.Is(err, errtype.EtcdSnapshotInvalid) || !ae.NonRetryable() {
		t.Errorf("sealed with another key: %v", err)
	}
	empty := &Activities{Keys: w.a.Keys, Destinations: drillDests{"prod/local": {Kind: "local", Path: t.TempDir()}}}
	if _, err := empty.RestorePlan(context.Background(), etcd.RestorePlanInput{Vault: in.Vault, Destination: "local"}); !errors.As(err, &ae) ||
		!errtype.Is(err, errtype.EtcdRestoreFailed) || !ae.NonRetryable() || !strings.Contains(err.Error(), "no snapshot of cluster prod in the destination") {
		t.Errorf("no snapshot: %v", err)
	}
	in.Destination = "/var/backups"
	if _, err := w.a.RestorePlan(context.Background(), in); err == nil {
		t.Error("a path for a destination's name was taken")
	}
}

// localHost runs the restore's scripts on this machine, as the host
// actions' Run does on a host: sh -s, the env exported, $KEDGE_OUTPUT's
// lines as outputs. Its PATH starts with fakes of pgrep and systemctl:
// a static pod "runs" while its manifest is in manifests, the etcd unit
// while the file unit-up exists. cut, when set, changes a script before
// it runs (a host cut short).
type localHost struct {
	t         *testing.T
	dir       string // bin/, manifests/, unit-up, systemctl.log
	cut       func(script string) string
	stubborn  bool // pgrep always finds the process
	scriptRan []string
}

func newLocalHost(t *testing.T) *localHost {
	h := &localHost{t: t, dir: t.TempDir()}
	bin := filepath.Join(h.dir, "bin")
	for _, d := range []string{bin, filepath.Join(h.dir, "manifests")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pgrep := `#!/bin/sh
# Prints the PIDs found, exits 0 when there are any (as pgrep does). A
# process of this host's is the script's own shell: alive, in its network
# namespace. Another network namespace's program of that name (another
# node of a test world on the same machine) is listed too.
pids=""
[ -e "$FAKE/other-pid" ] && pids=$(cat "$FAKE/other-pid")
mine=false
[ -e "$FAKE/stubborn" ] && mine=true
case "$2" in
kube-apiserver) [ -e "$FAKE/manifests/kube-apiserver.yaml" ] && mine=true ;;
etcd) { [ -e "$FAKE/manifests/etcd.yaml" ] || [ -e "$FAKE/unit-up" ]; } && mine=true ;;
esac
$mine && pids="$pids $PPID"
[ -n "$pids" ] || exit 1
for p in $pids; do echo "$p"; done
`
	systemctl := `#!/bin/sh
echo "$*" >> "$FAKE/systemctl.log"
case "$1" in
stop) rm -f "$FAKE/unit-up" ;;
start) touch "$FAKE/unit-up" ;;
esac
`
	for name, body := range map[string]string{"pgrep": pgrep, "systemctl": systemctl} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	journal := filepath.Join(h.dir, "journal")
	old := restoreJournal
	restoreJournal = journal
	t.Cleanup(func() { restoreJournal = old })
	return h
}

func (h *localHost) path(p ...string) string { return filepath.Join(append([]string{h.dir}, p...)...) }

func (h *localHost) Run(ctx context.Context, in host.RunInput) (host.RunResult, error) {
	script := in.Script
	if h.cut != nil {
		script = h.cut(script)
	}
	h.scriptRan = append(h.scriptRan, script)
	out := filepath.Join(h.t.TempDir(), "outputs")
	cmd := exec.CommandContext(ctx, "sh", "-s")
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = append(os.Environ(), "PATH="+h.path("bin")+":"+os.Getenv("PATH"), "FAKE="+h.dir, "KEDGE_OUTPUT="+out)
	for k, v := range in.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if h.stubborn {
		_ = os.WriteFile(h.path("stubborn"), nil, 0o644)
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := host.RunResult{Stdout: stdout.String(), Stderr: stderr.String(), Outputs: map[string]string{}}
	if f, ferr := os.Open(out); ferr == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), "="); ok {
				res.Outputs[k] = v
			}
		}
		f.Close()
	}
	if err != nil {
		return res, fmt.Errorf("exit status: %w: %s", err, stderr.String())
	}
	return res, nil
}

// localFiles serves SFTP of this machine's files through a pipe.
type localFiles struct{}

func (localFiles) WithSFTP(ctx context.Context, _ target.SSH, fn func(*sftp.Client) error) error {
	a, b := net.Pipe()
	srv, err := sftp.NewServer(a)
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve() }()
	defer srv.Close()
	cl, err := sftp.NewClientPipe(b, b)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(cl)
}

// Kedge's layout: the API server's manifest is moved aside first, then
// etcd's, each once its process is gone; a second stop only waits; the
// starts put each back, once; other static pods are left alone.
func TestStopAndStartStaticPods(t *testing.T) {
	h := newLocalHost(t)
	a := &Activities{Hosts: h}
	for _, m := range []string{"kube-apiserver.yaml", "etcd.yaml", "kube-scheduler.yaml"} {
		if err := os.WriteFile(h.path("manifests", m), []byte("kind: Pod # "+m+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	stop := etcd.StopControlPlaneInput{Token: "kedge-restore-t1", APIServerManifest: h.path("manifests", "kube-apiserver.yaml"),
		EtcdMode: "static-pod", EtcdManifest: h.path("manifests", "etcd.yaml"), Wait: "5s"}
	for i := range 2 {
		res, err := a.StopControlPlane(ctx, stop)
		if err != nil || !slices.Equal(res.Stopped, []string{"kube-apiserver", "etcd"}) {
			t.Fatalf("stop %d: %+v %v", i, res, err)
		}
	}
	left, _ := os.ReadDir(h.path("manifests"))
	if len(left) != 1 || left[0].Name() != "kube-scheduler.yaml" {
		t.Errorf("manifests after the stop: %v", left)
	}
	if b, err := os.ReadFile(h.path("journal", "kedge-restore-t1", "etcd.manifest")); err != nil || string(b) != "kind: Pod # etcd.yaml\n" {
		t.Errorf("etcd's manifest in the journal: %q %v", b, err)
	}
	for _, c := range []string{"etcd", "kube-apiserver"} {
		in := etcd.StartControlPlaneInput{Token: "kedge-restore-t1", Component: c, EtcdMode: "static-pod"}
		res, err := a.StartControlPlane(ctx, in)
		if err != nil || !slices.Equal(res.Started, []string{c}) {
			t.Fatalf("start %s: %+v %v", c, res, err)
		}
		if res, err := a.StartControlPlane(ctx, in); err != nil || len(res.Started) != 0 {
			t.Errorf("start %s again: %+v %v", c, res, err)
		}
		fi, err := os.Stat(h.path("manifests", c+".yaml"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s's manifest back: %v %v", c, fi, err)
		}
	}
	if left, _ := os.ReadDir(h.path("manifests")); len(left) != 3 {
		t.Errorf("manifests after the start: %v", left)
	}
}

// A kube-apiserver of the same name in a network namespace of its own
// (another node of a test world, a nested cluster) is not this member's:
// the stop does not wait for it (make test's restore once waited six
// minutes for another lane's API server).
func TestStopWaitsOnlyForThisHostsProcesses(t *testing.T) {
	other := exec.Command("unshare", "--net", "sleep", "60")
	if err := other.Start(); err != nil {
		t.Skipf("no network namespace here: %v", err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	// unshare execs sleep once the namespace is made.
	deadline := time.Now().Add(10 * time.Second)
	self, _ := os.Readlink("/proc/self/ns/net")
	for {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", other.Process.Pid))
		if err == nil && ns != self {
			break
		}
		if time.Now().After(deadline) {
			t.Skipf("unshare --net made no namespace of its own: %v %s", err, ns)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h := newLocalHost(t)
	if err := os.WriteFile(h.path("other-pid"), []byte(fmt.Sprintf("%d\n", other.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := etcd.StopControlPlaneInput{Token: "kedge-restore-t3", EtcdMode: "host-unit", EtcdUnit: "etcd-member.service", Wait: "2s"}
	if res, err := (&Activities{Hosts: h}).StopControlPlane(context.Background(), stop); err != nil || !slices.Equal(res.Stopped, []string{"kube-apiserver", "etcd"}) {
		t.Fatalf("stop beside another namespace's kube-apiserver: %+v %v", res, err)
	}
}

// Typhoon's layout: etcd's unit is stopped, and started without
// waiting; a process that will not go fails the stop, retried.
func TestStopAndStartEtcdUnit(t *testing.T) {
	h := newLocalHost(t)
	a := &Activities{Hosts: h}
	if err := os.WriteFile(h.path("unit-up"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stop := etcd.StopControlPlaneInput{Token: "kedge-restore-t2", EtcdMode: "host-unit", EtcdUnit: "etcd-member.service", Wait: "5s"}
	if res, err := a.StopControlPlane(ctx, stop); err != nil || !slices.Equal(res.Stopped, []string{"kube-apiserver", "etcd"}) {
		t.Fatalf("stop: %+v %v", res, err)
	}
	if res, err := a.StartControlPlane(ctx, etcd.StartControlPlaneInput{Token: "kedge-restore-t2", Component: "etcd", EtcdMode: "host-unit", EtcdUnit: "etcd-member.service"}); err != nil || !slices.Equal(res.Started, []string{"etcd"}) {
		t.Fatalf("start: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(h.path("systemctl.log")); string(b) != "stop etcd-member.service\nstart --no-block etcd-member.service\n" {
		t.Errorf("systemctl: %q", b)
	}
	h.stubborn = true
	stop.Wait = "2s"
	var ae *temporal.ApplicationError
	_, err := a.StopControlPlane(ctx, stop)
	if !errors.As(err, &ae) || !errtype.Is(err, errtype.EtcdRestoreFailed) || ae.NonRetryable() || !strings.Contains(err.Error(), "kube-apiserver still runs 2 s after it was stopped") {
		t.Errorf("a process that will not go: %v", err)
	}
	for _, bad := range []etcd.StopControlPlaneInput{
		{Token: "../x", EtcdMode: "host-unit", EtcdUnit: "etcd-member.service"},
		{Token: "t", EtcdMode: "host-unit", EtcdUnit: "etcd; reboot"},
		{Token: "t", EtcdMode: "static-pod", EtcdManifest: "etcd.yaml"},
		{Token: "t", EtcdMode: "none"},
	} {
		if _, err := a.StopControlPlane(ctx, bad); !errtype.Is(err, errtype.InvalidInput) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// restoreWorld is a drill world's snapshots, a local host and its
// member's data directory with an old member in it (mode 0750).
type restoreWorld struct {
	a    *Activities
	h    *localHost
	in   etcd.RestoreMemberInput
	data string
}

func newRestoreWorld(t *testing.T) *restoreWorld {
	w := newDrillWorld(t)
	h := newLocalHost(t)
	data := h.path("var", "lib", "etcd")
	if err := os.MkdirAll(filepath.Join(data, "member"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(data, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "member", "old"), []byte("the old member's data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &Activities{Keys: w.a.Keys, Destinations: w.a.Destinations, Hosts: h, Files: localFiles{}}
	in := etcd.RestoreMemberInput{Target: target.SSH{Address: "127.0.0.1"}, Vault: target.Vault{Cluster: "prod"}, Destination: "local", Snapshot: w.newest,
		Token: "kedge-restore-t3", Name: "m1", PeerURL: "https://10.0.0.1:2380", InitialCluster: "m1=https://10.0.0.1:2380,m2=https://10.0.0.2:2380", DataDir: data}
	return &restoreWorld{a: a, h: h, in: in, data: data}
}

func (w *restoreWorld) kept() string { return w.data + ".before-" + w.in.Token }

// checkRestored fails unless the data directory is a restored member's
// (mode 0750 as the old one's) and the old one is kept beside it.
func (w *restoreWorld) checkRestored(t *testing.T) {
	t.Helper()
	fi, err := os.Stat(w.data)
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("the restored data directory: %v %v", fi, err)
	}
	for _, p := range []string{"member/snap/db", "member/wal"} {
		if _, err := os.Stat(filepath.Join(w.data, p)); err != nil {
			t.Errorf("the restored data directory lacks %s: %v", p, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(w.kept(), "member", "old")); err != nil || string(b) != "the old member's data\n" {
		t.Errorf("the old data directory kept: %q %v", b, err)
	}
	if _, err := os.Stat(w.data + ".restoring-" + w.in.Token); !os.IsNotExist(err) {
		t.Errorf("the staging directory is left: %v", err)
	}
}

// A worker lost after shipping the restored data leaves the old data
// directory in place; the next attempt finishes the job; one after the
// member started changes nothing.
func TestRestoreMemberResumesAfterALostWorker(t *testing.T) {
	w := newRestoreWorld(t)
	ctx := context.Background()
	afterShip = func() error { return errors.New("the worker died") }
	t.Cleanup(func() { afterShip = nil })
	if _, err := w.a.RestoreMember(ctx, w.in); err == nil || !strings.Contains(err.Error(), "the worker died") {
		t.Fatalf("the cut attempt: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.data, "member", "old")); err != nil {
		t.Fatalf("the cut attempt moved the old data: %v", err)
	}
	afterShip = nil
	res, err := w.a.RestoreMember(ctx, w.in)
	if err != nil || !res.Restored || res.Kept != w.kept() || res.Mode != "750" || res.Owner != fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()) || res.Shipped < 1<<10 {
		t.Fatalf("the next attempt: %+v %v", res, err)
	}
	w.checkRestored(t)

	// The member started: its data changes; a third attempt keeps it.
	started := filepath.Join(w.data, "member", "started")
	if err := os.WriteFile(started, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err = w.a.RestoreMember(ctx, w.in)
	if err != nil || res.Restored || res.Kept != w.kept() {
		t.Fatalf("an attempt after the member started: %+v %v", res, err)
	}
	if _, err := os.Stat(started); err != nil {
		t.Errorf("a started member was restored over: %v", err)
	}
	if kept, _ := filepath.Glob(w.data + ".before-*"); len(kept) != 1 {
		t.Errorf("old data directories: %v", kept)
	}
}

// A host cut right after the old data directory was moved aside: the
// next attempt moves nothing again and puts the restored one in place;
// a data directory that appeared in between (something started etcd) is
// refused, never replaced.
func TestRestoreMemberResumesAfterTheOldDataMoved(t *testing.T) {
	for _, appeared := range []bool{false, true} {
		t.Run(fmt.Sprintf("appeared=%v", appeared), func(t *testing.T) {
			w := newRestoreWorld(t)
			ctx := context.Background()
			w.h.cut = func(s string) string {
				return strings.Replace(s, `  if [ -d "$STAGING" ]; then`, "  exit 9\n  if [ -d \"$STAGING\" ]; then", 1)
			}
			if _, err := w.a.RestoreMember(ctx, w.in); err == nil {
				t.Fatal("the cut install succeeded")
			}
			if _, err := os.Stat(w.data); !os.IsNotExist(err) {
				t.Fatalf("after the cut: %v", err)
			}
			w.h.cut = nil
			if appeared {
				if err := os.MkdirAll(filepath.Join(w.data, "member"), 0o700); err != nil {
					t.Fatal(err)
				}
				_, err := w.a.RestoreMember(ctx, w.in)
				if !errtype.Is(err, errtype.EtcdRestoreFailed) || !strings.Contains(err.Error(), "appeared after the old data directory was moved aside") {
					t.Fatalf("a data directory that appeared: %v", err)
				}
				return
			}
			res, err := w.a.RestoreMember(ctx, w.in)
			if err != nil || !res.Restored || res.Kept != w.kept() {
				t.Fatalf("the next attempt: %+v %v", res, err)
			}
			w.checkRestored(t)
		})
	}
}

// A member whose data directory is gone is restored with the owner the
// layout gives and mode 0700; what the restore cannot use is refused
// before anything runs.
func TestRestoreMemberOfALostDataDirectory(t *testing.T) {
	w := newRestoreWorld(t)
	if err := os.RemoveAll(w.data); err != nil {
		t.Fatal(err)
	}
	w.in.Owner = "0:0"
	res, err := w.a.RestoreMember(context.Background(), w.in)
	if err != nil || !res.Restored || res.Kept != "" || res.Owner != "0:0" || res.Mode != "700" {
		t.Fatalf("%+v %v", res, err)
	}
	// A data directory that is not one (a disk that broke) is kept, and
	// gives neither its owner nor its mode.
	broken := newRestoreWorld(t)
	if err := os.RemoveAll(broken.data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(broken.data, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = broken.a.RestoreMember(context.Background(), broken.in)
	if fi, serr := os.Stat(broken.data); err != nil || !res.Restored || res.Kept != broken.kept() || res.Mode != "700" || serr != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("a data directory that is a file: %+v %v (%v)", res, err, serr)
	}
	if b, _ := os.ReadFile(broken.kept()); string(b) != "not a directory" {
		t.Errorf("the broken data directory kept: %q", b)
	}
	for _, bad := range []func(*etcd.RestoreMemberInput){
		func(in *etcd.RestoreMemberInput) { in.DataDir = "/" },
		func(in *etcd.RestoreMemberInput) { in.DataDir = "var/lib/etcd" },
		func(in *etcd.RestoreMemberInput) { in.Token = "a b" },
		func(in *etcd.RestoreMemberInput) { in.Owner = "root; reboot" },
		func(in *etcd.RestoreMemberInput) { in.PeerURL = "https://10.0.0.9:2380" },
	} {
		in := w.in
		bad(&in)
		ran := len(w.h.scriptRan)
		if _, err := w.a.RestoreMember(context.Background(), in); !errtype.Is(err, errtype.InvalidInput) || len(w.h.scriptRan) != ran {
			t.Errorf("%+v: %v", in, err)
		}
	}
}
