package sshhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"kedge.dev/kedge/activities/sshpool"
	"kedge.dev/kedge/integration/sshtest"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/target"
)

type world struct {
	srv  *sshtest.Server
	pool *sshpool.Pool
	acts *Activities
	tg   target.SSH
}

func newWorld(t testing.TB) *world {
	srv := sshtest.Start(t, sshtest.Config{})
	pool := sshpool.New(sshpool.Options{})
	t.Cleanup(func() { pool.Close() })
	return &world{
		srv:  srv,
		pool: pool,
		acts: &Activities{Pool: pool, HeartbeatInterval: 50 * time.Millisecond, BackupDir: filepath.Join(srv.Dir, "backup")},
		tg: target.SSH{Node: "worker-1", Address: srv.Host, Port: srv.Port,
			IdentityFile: srv.IdentityFile, KnownHostsFile: srv.KnownHostsFile},
	}
}

// appErr asserts err is an application error of type typ.
func appErr(t *testing.T, err error, typ string, nonRetryable bool) *temporal.ApplicationError {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		t.Fatalf("want a %s application error, got %T %v", typ, err, err)
	}
	if !errtype.Is(err, typ) || app.NonRetryable() != nonRetryable {
		t.Fatalf("got type %s nonRetryable=%v (%v), want %s nonRetryable=%v", app.Type(), app.NonRetryable(), err, typ, nonRetryable)
	}
	return app
}

func TestRunExitCodes(t *testing.T) {
	w := newWorld(t)
	res, err := w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Command: "echo out; echo boom >&2; exit 3"})
	app := appErr(t, err, errtype.CommandFailed, false)
	var code int
	if app.Details(&code); code != 3 {
		t.Errorf("details exit code %d", code)
	}
	if !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "worker-1") {
		t.Errorf("message %q", err)
	}
	if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "boom\n" {
		t.Errorf("result %+v", res)
	}

	res, err = w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Command: "exit 3", AcceptExitCodes: []int{0, 3}})
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("accepted exit code: %+v %v", res, err)
	}
	if _, err := w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Command: "true", AcceptExitCodes: []int{1}}); err == nil {
		t.Error("exit 0 accepted though only 1 was")
	}
}

func TestRunEnvIsQuoted(t *testing.T) {
	w := newWorld(t)
	env := map[string]string{
		"A": `it's "quoted"`,
		"B": "with  spaces",
		"C": "$HOME and $(echo pwned) and `echo pwned` and ${X:-y}",
		"D": "new\nline",
		"E": `back\slash \n`,
		"F": "",
		"G": "'",
	}
	res, err := w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Env: env,
		Command: `printf '%s|' "$A" "$B" "$C" "$D" "$E" "$F" "$G"`})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{env["A"], env["B"], env["C"], env["D"], env["E"], env["F"], env["G"]}, "|") + "|"
	if res.Stdout != want {
		t.Errorf("got  %q\nwant %q", res.Stdout, want)
	}
	_, err = w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Command: "true", Env: map[string]string{"KEDGE_OUTPUT": "/etc/passwd"}})
	appErr(t, err, errtype.InvalidInput, true)
}

func TestRunOutputs(t *testing.T) {
	w := newWorld(t)
	res, err := w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Command: `
echo "$KEDGE_OUTPUT"
echo version=1.2.3 >> "$KEDGE_OUTPUT"
echo "url=http://x/?a=b" >> "$KEDGE_OUTPUT"
printf 'cert<<EOT\nline 1\nline 2\nEOT\n' >> "$KEDGE_OUTPUT"
printf 'last=no newline' >> "$KEDGE_OUTPUT"
printf 'err1\nerr2' >&2`})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"version": "1.2.3", "url": "http://x/?a=b", "cert": "line 1\nline 2", "last": "no newline"}
	if fmt.Sprint(res.Outputs) != fmt.Sprint(want) {
		t.Errorf("outputs %q, want %q", res.Outputs, want)
	}
	if res.Stderr != "err1\nerr2" {
		t.Errorf("stderr %q", res.Stderr)
	}
	outFile := strings.TrimSpace(res.Stdout)
	if !strings.Contains(outFile, ".kedge-out-") {
		t.Fatalf("KEDGE_OUTPUT=%q", outFile)
	}
	waitGone(t, outFile)

	// No outputs: nil, and no file is left behind.
	res, err = w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Command: `echo "$KEDGE_OUTPUT"`})
	if err != nil || res.Outputs != nil || res.Stderr != "" {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := os.Stat(strings.TrimSpace(res.Stdout)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("outputs file exists: %v", err)
	}

	// A failing command still reports its outputs.
	res, err = w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Command: `echo k=v >> "$KEDGE_OUTPUT"; exit 2`})
	if err == nil || res.Outputs["k"] != "v" {
		t.Errorf("%+v %v", res, err)
	}
}

func waitGone(t *testing.T, file string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not removed", file)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunScript(t *testing.T) {
	w := newWorld(t)
	script := "set -e\necho one\nx=$(echo two)\necho \"$x\"\ncat <<'EOF'\n$literal\nEOF\necho k=$x >> \"$KEDGE_OUTPUT\"\nprintf 'no newline at the end'"
	res, err := w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Script: script, Env: map[string]string{"V": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "one\ntwo\n$literal\nno newline at the end" || res.Outputs["k"] != "two" {
		t.Errorf("%+v", res)
	}
	res, err = w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Script: "echo $V; false\necho not reached?\nexit 4\n", Env: map[string]string{"V": "v"}})
	app := appErr(t, err, errtype.CommandFailed, false)
	_ = app
	if res.ExitCode != 4 || res.Stdout != "v\nnot reached?\n" {
		t.Errorf("%+v", res)
	}
}

func TestRunInvalidInput(t *testing.T) {
	w := newWorld(t)
	for _, in := range []host.RunInput{
		{Target: w.tg},
		{Target: w.tg, Command: "a", Script: "b"},
		{Target: w.tg, Command: "true", Timeout: "soon"},
		{Target: w.tg, Command: "true", Env: map[string]string{"A B": "x"}},
	} {
		_, err := w.acts.Run(t.Context(), in)
		appErr(t, err, errtype.InvalidInput, true)
	}
	if w.srv.Accepted() != 0 {
		t.Error("invalid input reached the host")
	}
}

func TestRunOutputCapKeepsTheTail(t *testing.T) {
	w := newWorld(t)
	res, err := w.acts.Run(t.Context(), host.RunInput{Target: w.tg, OutputLimit: 100,
		Command: `seq 1 100000; seq 1 50000 >&2; echo k=v >> "$KEDGE_OUTPUT"`})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(res.Stdout, "\n99999\n100000\n") || len(res.Stdout) != 100 || !res.StdoutTruncated {
		t.Errorf("stdout %q truncated=%v", res.Stdout, res.StdoutTruncated)
	}
	if !strings.HasSuffix(res.Stderr, "\n49999\n50000\n") || len(res.Stderr) != 100 || !res.StderrTruncated {
		t.Errorf("stderr %q truncated=%v", res.Stderr, res.StderrTruncated)
	}
	if res.Outputs["k"] != "v" {
		t.Errorf("outputs lost behind a large stderr: %v", res.Outputs)
	}
	res, err = w.acts.Run(t.Context(), host.RunInput{Target: w.tg, OutputLimit: 100, Command: "echo short"})
	if err != nil || res.StdoutTruncated || res.Stdout != "short\n" {
		t.Errorf("%+v %v", res, err)
	}
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func readPids(t *testing.T, files ...string) []int {
	t.Helper()
	var pids []int
	for _, f := range files {
		var data []byte
		deadline := time.Now().Add(3 * time.Second)
		for {
			data, _ = os.ReadFile(f)
			if bytes.HasSuffix(data, []byte("\n")) || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatalf("%s: %q", f, data)
		}
		pids = append(pids, pid)
	}
	return pids
}

func waitDead(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d survived", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestRunTimeoutKillsTheCommand(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	start := time.Now()
	_, err := w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Timeout: "300ms", Command: fmt.Sprintf(
		`sleep 31 & echo $! > %[1]s/child; echo $$ > %[1]s/shell; echo started >&2; wait`, dir)})
	appErr(t, err, errtype.CommandTimeout, false)
	if !strings.Contains(err.Error(), "300ms") || !strings.Contains(err.Error(), "started") {
		t.Errorf("message %q", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("timeout took %s", d)
	}
	waitDead(t, readPids(t, dir+"/child", dir+"/shell"))
	// The connection is still good.
	if _, err := w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Command: "true"}); err != nil {
		t.Fatal(err)
	}
	if w.srv.Accepted() != 1 {
		t.Errorf("%d connections", w.srv.Accepted())
	}
}

func TestRunCancelKillsTheCommand(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		readPids(t, dir+"/shell")
		cancel()
	}()
	_, err := w.acts.Run(ctx, host.RunInput{Target: w.tg, Script: fmt.Sprintf(
		"sleep 32 & echo $! > %[1]s/child\necho $$ > %[1]s/shell\nwait\n", dir)})
	if !temporal.IsCanceledError(err) {
		t.Fatalf("got %T %v", err, err)
	}
	waitDead(t, readPids(t, dir+"/child", dir+"/shell"))
}

func TestRunConcurrentOnOneConnection(t *testing.T) {
	w := newWorld(t)
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Command: fmt.Sprintf(`sleep 0.05; echo n=%d >> "$KEDGE_OUTPUT"`, i)})
			if err != nil || res.Outputs["n"] != strconv.Itoa(i) {
				t.Errorf("%d: %+v %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	if n := w.srv.Accepted(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

func TestRunRedialsAfterADrop(t *testing.T) {
	w := newWorld(t)
	if _, err := w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Command: "true"}); err != nil {
		t.Fatal(err)
	}
	w.srv.DropAll()
	if res, err := w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Command: "echo ok"}); err != nil || res.Stdout != "ok\n" {
		t.Fatalf("%+v %v", res, err)
	}
	// A drop in the middle of a command is ConnectionLost (retryable).
	go func() {
		time.Sleep(200 * time.Millisecond)
		w.srv.DropAll()
	}()
	_, err := w.acts.Run(t.Context(), host.RunInput{Target: w.tg, Command: "sleep 2"})
	appErr(t, err, errtype.ConnectionLost, false)
}

func TestConnectionErrorsAtTheActivityBoundary(t *testing.T) {
	w := newWorld(t)

	bad := w.tg
	bad.KnownHostsFile = filepath.Join(t.TempDir(), "known_hosts")
	w.srv.WriteKnownHosts(t, bad.KnownHostsFile, sshtest.NewSigner(t).PublicKey())
	_, err := w.acts.Run(t.Context(), host.RunInput{Target: bad, Command: "true"})
	appErr(t, err, errtype.HostKeyMismatch, true)
	if !strings.Contains(err.Error(), "SHA256:") {
		t.Errorf("message %q", err)
	}

	os.WriteFile(bad.KnownHostsFile, nil, 0o644)
	_, err = w.acts.WriteFile(t.Context(), host.WriteFileInput{Target: bad, Path: w.srv.Dir + "/x", Content: "x"})
	appErr(t, err, errtype.HostUnknown, true)

	stranger := w.tg
	stranger.IdentityFile = filepath.Join(t.TempDir(), "id")
	os.WriteFile(stranger.IdentityFile, mustKeyPEM(t), 0o600)
	_, err = w.acts.ReadFile(t.Context(), host.ReadFileInput{Target: stranger, Path: "/etc/hostname"})
	appErr(t, err, errtype.AuthFailed, true)

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := w.tg
	closed.Port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	_, err = w.acts.Run(t.Context(), host.RunInput{Target: closed, Command: "true"})
	appErr(t, err, errtype.HostUnreachable, false)

	noKH := w.tg
	noKH.KnownHostsFile = ""
	_, err = w.acts.Run(t.Context(), host.RunInput{Target: noKH, Command: "true"})
	appErr(t, err, errtype.InvalidInput, true)
}

func mustKeyPEM(t *testing.T) []byte {
	other := sshtest.Start(t, sshtest.Config{})
	data, err := os.ReadFile(other.IdentityFile)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func hexSum(b string) string {
	h := sha256.Sum256([]byte(b))
	return hex.EncodeToString(h[:])
}

func TestWriteFileRestoreRoundTrip(t *testing.T) {
	w := newWorld(t)
	p := filepath.Join(w.srv.Dir, "etc/app/sub/config.yaml")

	// A new file: parent directories are made, nothing to back up.
	res, err := w.acts.WriteFile(t.Context(), host.WriteFileInput{Target: w.tg, Path: p, Content: "v: 1\n", Mode: "0640"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || res.Existed || res.Backup != "" || res.SHA256 != hexSum("v: 1\n") {
		t.Errorf("%+v", res)
	}
	checkFile(t, p, "v: 1\n", 0o640)
	created := res

	// Unchanged: skipped.
	res, err = w.acts.WriteFile(t.Context(), host.WriteFileInput{Target: w.tg, Path: p, Content: "v: 1\n", Mode: "640"})
	if err != nil || res.Changed || !res.Existed || res.Backup != "" || res.PreviousSHA256 != res.SHA256 {
		t.Errorf("unchanged write: %+v %v", res, err)
	}
	// Same content, other mode: changed.
	res, err = w.acts.WriteFile(t.Context(), host.WriteFileInput{Target: w.tg, Path: p, Content: "v: 1\n", Mode: "0600"})
	if err != nil || !res.Changed {
		t.Errorf("mode change: %+v %v", res, err)
	}
	checkFile(t, p, "v: 1\n", 0o600)

	// New content: the previous one is kept.
	res, err = w.acts.WriteFile(t.Context(), host.WriteFileInput{Target: w.tg, Path: p, Content: "v: 2\n"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || !res.Existed || res.PreviousSHA256 != hexSum("v: 1\n") || !strings.HasPrefix(res.Backup, w.acts.BackupDir+"/") {
		t.Errorf("%+v", res)
	}
	checkFile(t, p, "v: 2\n", 0o644)
	checkFile(t, res.Backup, "v: 1\n", 0o600)
	if fi, err := os.Stat(w.acts.BackupDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("backup dir: %v %v", fi.Mode(), err)
	}
	noTempFiles(t, filepath.Dir(p))

	// Undo: the previous content and mode come back.
	changed := true
	rr, err := w.acts.RestoreFile(t.Context(), host.RestoreFileInput{Target: w.tg, Path: p, Backup: res.Backup, Existed: true, Changed: &changed})
	if err != nil || !rr.Restored {
		t.Fatalf("%+v %v", rr, err)
	}
	checkFile(t, p, "v: 1\n", 0o600)
	// Twice is fine.
	if _, err := w.acts.RestoreFile(t.Context(), host.RestoreFileInput{Target: w.tg, Path: p, Backup: res.Backup, Existed: true}); err != nil {
		t.Fatal(err)
	}

	// Undo of an unchanged write does nothing.
	unchanged := false
	rr, err = w.acts.RestoreFile(t.Context(), host.RestoreFileInput{Target: w.tg, Path: p, Existed: true, Changed: &unchanged})
	if err != nil || rr.Restored || rr.Removed {
		t.Errorf("%+v %v", rr, err)
	}
	checkFile(t, p, "v: 1\n", 0o600)

	// Undo of the creation removes the file, idempotently.
	for range 2 {
		rr, err = w.acts.RestoreFile(t.Context(), host.RestoreFileInput{Target: w.tg, Path: p, Backup: created.Backup, Existed: created.Existed, Changed: &created.Changed})
		if err != nil || !rr.Removed {
			t.Fatalf("%+v %v", rr, err)
		}
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file still there: %v", err)
	}

	// Existed without a backup cannot be undone.
	_, err = w.acts.RestoreFile(t.Context(), host.RestoreFileInput{Target: w.tg, Path: p, Existed: true})
	appErr(t, err, errtype.InvalidInput, true)
	// A backup that is gone.
	_, err = w.acts.RestoreFile(t.Context(), host.RestoreFileInput{Target: w.tg, Path: p, Backup: w.acts.BackupDir + "/nope", Existed: true})
	appErr(t, err, errtype.FileNotFound, true)
}

func TestWriteFileOptions(t *testing.T) {
	w := newWorld(t)
	p := filepath.Join(w.srv.Dir, "bin.dat")
	bin := []byte{0, 1, 2, 0xff, 0xfe}
	res, err := w.acts.WriteFile(t.Context(), host.WriteFileInput{Target: w.tg, Path: p, ContentBase64: base64.StdEncoding.EncodeToString(bin), Mode: "0755"})
	if err != nil || !res.Changed {
		t.Fatalf("%+v %v", res, err)
	}
	checkFile(t, p, string(bin), 0o755)

	res, err = w.acts.WriteFile(t.Context(), host.WriteFileInput{Target: w.tg, Path: p, Content: "text", Mode: "0755", NoBackup: true})
	if err != nil || !res.Changed || !res.Existed || res.Backup != "" {
		t.Fatalf("%+v %v", res, err)
	}
	if entries, _ := os.ReadDir(w.acts.BackupDir); len(entries) != 0 {
		t.Errorf("noBackup kept %d backups", len(entries))
	}
	// An empty file is a file.
	res, err = w.acts.WriteFile(t.Context(), host.WriteFileInput{Target: w.tg, Path: p, Mode: "0755", NoBackup: true})
	if err != nil || !res.Changed {
		t.Fatalf("%+v %v", res, err)
	}
	checkFile(t, p, "", 0o755)

	for _, in := range []host.WriteFileInput{
		{Target: w.tg, Path: p, Content: "a", ContentBase64: "YQ=="},
		{Target: w.tg, Path: p, ContentBase64: "not base64!"},
		{Target: w.tg, Path: "relative/x", Content: "a"},
		{Target: w.tg, Path: p + "/../x", Content: "a"},
		{Target: w.tg, Path: p, Content: "a", Mode: "rw-r--r--"},
	} {
		_, err := w.acts.WriteFile(t.Context(), in)
		appErr(t, err, errtype.InvalidInput, true)
	}

	// A directory in the way is a file error, not a connection problem.
	dir := filepath.Join(w.srv.Dir, "adir")
	os.Mkdir(dir, 0o755)
	_, err = w.acts.WriteFile(t.Context(), host.WriteFileInput{Target: w.tg, Path: dir, Content: "a"})
	appErr(t, err, errtype.FileOperationFailed, false)
}

func TestWriteFileSurvivesADroppedConnection(t *testing.T) {
	w := newWorld(t)
	p := filepath.Join(w.srv.Dir, "f")
	if _, err := w.acts.WriteFile(t.Context(), host.WriteFileInput{Target: w.tg, Path: p, Content: "1"}); err != nil {
		t.Fatal(err)
	}
	w.srv.DropAll()
	res, err := w.acts.WriteFile(t.Context(), host.WriteFileInput{Target: w.tg, Path: p, Content: "2"})
	if err != nil || !res.Changed || res.Backup == "" {
		t.Fatalf("%+v %v", res, err)
	}
	checkFile(t, p, "2", 0o644)
}

func checkFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil || string(data) != content {
		t.Errorf("%s: %q %v, want %q", p, data, err, content)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != mode {
		t.Errorf("%s: mode %v %v, want %v", p, fi.Mode(), err, mode)
	}
}

func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".kedge-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestReadFile(t *testing.T) {
	w := newWorld(t)
	text := filepath.Join(w.srv.Dir, "text")
	os.WriteFile(text, []byte("héllo\n"), 0o640)
	res, err := w.acts.ReadFile(t.Context(), host.ReadFileInput{Target: w.tg, Path: text})
	if err != nil || !res.Exists || res.Content != "héllo\n" || res.ContentBase64 != "" || res.Mode != "0640" || res.Size != 7 || res.SHA256 != hexSum("héllo\n") {
		t.Errorf("%+v %v", res, err)
	}

	bin := filepath.Join(w.srv.Dir, "bin")
	os.WriteFile(bin, []byte{0xff, 0, 1}, 0o4755)
	os.Chmod(bin, 0o755|os.ModeSetuid)
	res, err = w.acts.ReadFile(t.Context(), host.ReadFileInput{Target: w.tg, Path: bin})
	if err != nil || res.Content != "" || res.ContentBase64 != base64.StdEncoding.EncodeToString([]byte{0xff, 0, 1}) || res.Mode != "4755" {
		t.Errorf("%+v %v", res, err)
	}

	missing := filepath.Join(w.srv.Dir, "missing")
	_, err = w.acts.ReadFile(t.Context(), host.ReadFileInput{Target: w.tg, Path: missing})
	appErr(t, err, errtype.FileNotFound, true)
	res, err = w.acts.ReadFile(t.Context(), host.ReadFileInput{Target: w.tg, Path: missing, Missing: "empty"})
	if err != nil || res.Exists || res.Content != "" {
		t.Errorf("%+v %v", res, err)
	}

	_, err = w.acts.ReadFile(t.Context(), host.ReadFileInput{Target: w.tg, Path: text, MaxBytes: 3})
	appErr(t, err, errtype.InvalidInput, true)
	_, err = w.acts.ReadFile(t.Context(), host.ReadFileInput{Target: w.tg, Path: text, Missing: "ignore"})
	appErr(t, err, errtype.InvalidInput, true)
}

// fakeSystemctl puts a systemctl on the test server's PATH that keeps unit
// state in files under dir: units named fail-* end up failed, slow-* take
// a while to become active, oneshot-* are oneshots.
func fakeSystemctl(t *testing.T) string {
	bin := t.TempDir()
	state := t.TempDir()
	script := `#!/bin/sh
state=` + state + `
log() { echo "$*" >> $state/calls; }
log "$@"
case "$1" in
daemon-reload) exit 0 ;;
enable|disable) echo "$1d $2" > $state/$2.enabled; exit 0 ;;
start|restart|reload)
  case "$2" in
  fail-*) echo failed > $state/$2; echo "Job for $2 failed." >&2; exit 1 ;;
  slow-*) echo activating > $state/$2; (sleep 0.5; echo active > $state/$2) & exit 0 ;;
  oneshot-*) echo inactive > $state/$2; exit 0 ;;
  missing-*) echo "Unit $2 not found." >&2; exit 5 ;;
  esac
  echo active > $state/$2; echo 4242 > $state/$2.pid; date +%s%N > $state/$2.invocation; exit 0 ;;
stop) echo inactive > $state/$2; echo 0 > $state/$2.pid; rm -f $state/$2.invocation; exit 0 ;;
is-active) s=$(cat $state/$2 2>/dev/null || echo inactive); echo $s; [ "$s" = active ] ;;
show)
  case "$3" in
  MainPID) cat $state/$5.pid 2>/dev/null || echo 0 ;;
  InvocationID) cat $state/$5.invocation 2>/dev/null || echo ;;
  Type) case "$5" in oneshot-*) echo oneshot ;; *) echo simple ;; esac ;;
  esac ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return state
}

func TestSystemd(t *testing.T) {
	state := fakeSystemctl(t)
	w := newWorld(t)
	res, err := w.acts.Systemd(t.Context(), host.SystemdInput{Target: w.tg, Unit: "kubelet.service", DaemonReload: true, Enable: true, Action: "restart"})
	if err != nil || res.ActiveState != "active" || res.MainPID != 4242 {
		t.Fatalf("%+v %v", res, err)
	}
	calls, _ := os.ReadFile(filepath.Join(state, "calls"))
	if !strings.HasPrefix(string(calls), "daemon-reload\nenable kubelet.service\nrestart kubelet.service\n") {
		t.Errorf("calls:\n%s", calls)
	}

	res, err = w.acts.Systemd(t.Context(), host.SystemdInput{Target: w.tg, Unit: "kubelet.service", Action: "stop"})
	if err != nil || res.ActiveState != "inactive" || res.MainPID != 0 {
		t.Fatalf("stop: %+v %v", res, err)
	}

	res, err = w.acts.Systemd(t.Context(), host.SystemdInput{Target: w.tg, Unit: "slow-x.service", Action: "start"})
	if err != nil || res.ActiveState != "active" {
		t.Fatalf("slow start: %+v %v", res, err)
	}
	res, err = w.acts.Systemd(t.Context(), host.SystemdInput{Target: w.tg, Unit: "oneshot-x.service", Action: "start"})
	if err != nil || res.ActiveState != "inactive" {
		t.Fatalf("oneshot: %+v %v", res, err)
	}

	_, err = w.acts.Systemd(t.Context(), host.SystemdInput{Target: w.tg, Unit: "fail-x.service", Action: "start"})
	appErr(t, err, errtype.UnitFailed, false)
	if !strings.Contains(err.Error(), "journalctl -u fail-x.service") {
		t.Errorf("message %q", err)
	}
	_, err = w.acts.Systemd(t.Context(), host.SystemdInput{Target: w.tg, Unit: "missing-x.service", Action: "start"})
	appErr(t, err, errtype.CommandFailed, false)
	if !strings.Contains(err.Error(), "not found") {
		t.Errorf("message %q", err)
	}

	// A unit that never settles fails after waitTimeout.
	os.WriteFile(filepath.Join(state, "stuck.service"), []byte("activating\n"), 0o644)
	start := time.Now()
	res, err = w.acts.Systemd(t.Context(), host.SystemdInput{Target: w.tg, Unit: "stuck.service", Action: "none", Enable: true, WaitTimeout: "1s"})
	if err != nil || res.ActiveState != "activating" {
		t.Fatalf("action none reports: %+v %v", res, err)
	}
	os.WriteFile(filepath.Join(state, "stuck2.service"), []byte("activating\n"), 0o644)
	script := systemdScript(host.SystemdInput{Unit: "stuck2.service"}, "active", time.Second, "")
	r, err := w.acts.exec(t.Context(), w.tg, execSpec{script: script, limit: 1024})
	if err != nil || r.Outputs["state"] != "activating" || time.Since(start) > 5*time.Second {
		t.Fatalf("%+v %v", r, err)
	}

	for _, in := range []host.SystemdInput{
		{Target: w.tg, Unit: "x; rm -rf /"},
		{Target: w.tg, Unit: "--now"},
		{Target: w.tg, Unit: "x", Action: "bounce"},
		{Target: w.tg, Unit: "x", Enable: true, Disable: true},
		{Target: w.tg, Unit: "x", WaitTimeout: "-1s"},
	} {
		_, err := w.acts.Systemd(t.Context(), in)
		appErr(t, err, errtype.InvalidInput, true)
	}
}

// TestARestartIsDoneOncePerActivity: Temporal delivers an activity task
// at least once; a second delivery of the same restart finds the host's
// record and leaves the invocation it started alone, while another
// activity, or the same one after the unit was restarted by anyone else,
// restarts it.
func TestARestartIsDoneOncePerActivity(t *testing.T) {
	state := fakeSystemctl(t)
	w := newWorld(t)
	w.acts.RunDir = t.TempDir()
	restarts := func() int {
		calls, _ := os.ReadFile(filepath.Join(state, "calls"))
		return strings.Count(string(calls), "restart kubelet.service\n")
	}
	in := host.SystemdInput{Target: w.tg, Unit: "kubelet.service", Action: "restart"}
	// A test activity environment numbers its activities from the same
	// start: the first activity of each is one activity delivered again.
	deliver := func() (*testsuite.TestActivityEnvironment, host.SystemdResult) {
		t.Helper()
		var s testsuite.WorkflowTestSuite
		env := s.NewTestActivityEnvironment()
		env.RegisterActivityWithOptions(w.acts.Systemd, activity.RegisterOptions{Name: host.SystemdAction})
		val, err := env.ExecuteActivity(host.SystemdAction, in)
		if err != nil {
			t.Fatal(err)
		}
		var res host.SystemdResult
		if err := val.Get(&res); err != nil {
			t.Fatal(err)
		}
		return env, res
	}
	env, first := deliver()
	if restarts() != 1 || first.ActiveState != "active" || first.StartedAt == "" {
		t.Fatalf("first delivery: %d restarts, %+v", restarts(), first)
	}
	_, again := deliver()
	if restarts() != 1 {
		t.Errorf("a second delivery of the same activity restarted the unit again (%d restarts)", restarts())
	}
	if again != first {
		t.Errorf("the second delivery reports %+v, the first %+v", again, first)
	}
	// Another activity of the same workflow restarts.
	if _, err := env.ExecuteActivity(host.SystemdAction, in); err != nil || restarts() != 2 {
		t.Errorf("another activity: %d restarts, %v", restarts(), err)
	}
	// The unit restarted since (a new invocation): the first activity,
	// delivered again, restarts it.
	if _, err := w.acts.Systemd(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	n := restarts()
	deliver()
	if restarts() != n+1 {
		t.Errorf("the unit ran another invocation, yet the repeated delivery did not restart it")
	}
	// Outside an activity nothing is recorded.
	records, _ := filepath.Glob(filepath.Join(w.acts.RunDir, "restarts", "*"))
	if len(records) != 2 {
		t.Errorf("records: %v, want the two activities'", records)
	}
	// A record that cannot be written does not fail the restart.
	w.acts.RunDir = "/proc/kedge-nowhere"
	n = restarts()
	if _, res := deliver(); res.ActiveState != "active" || restarts() != n+1 {
		t.Errorf("with an unwritable record: %+v, %d restarts", res, restarts()-n)
	}
}

func TestInsideAnActivityItHeartbeats(t *testing.T) {
	w := newWorld(t)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	var mu sync.Mutex
	var beats int
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) {
		mu.Lock()
		beats++
		mu.Unlock()
	})
	env.RegisterActivityWithOptions(w.acts.Run, activity.RegisterOptions{Name: host.RunAction})
	val, err := env.ExecuteActivity(host.RunAction, host.RunInput{Target: w.tg, Command: `sleep 0.4; echo k=v >> "$KEDGE_OUTPUT"`})
	if err != nil {
		t.Fatal(err)
	}
	var res host.RunResult
	if err := val.Get(&res); err != nil || res.Outputs["k"] != "v" {
		t.Fatalf("%+v %v", res, err)
	}
	// The SDK throttles what it sends, so only count that some came. The
	// lock is not held past this read: a heartbeat of the next activity
	// takes it inside the SDK's own lock, which ExecuteActivity waits for.
	mu.Lock()
	n := beats
	mu.Unlock()
	if n < 1 {
		t.Errorf("no heartbeat in 0.4s at a 50ms interval")
	}

	// Long enough to heartbeat while it runs (a test that held its lock
	// here deadlocked against the SDK under load).
	_, err = env.ExecuteActivity(host.RunAction, host.RunInput{Target: w.tg, Command: "sleep 0.3; exit 7"})
	if !errtype.Is(err, errtype.CommandFailed) {
		t.Fatalf("got %v", err)
	}
}

// BenchmarkRawExec is the floor: one exec per iteration over an open
// connection, no wrapper.
func BenchmarkRawExec(b *testing.B) {
	w := newWorld(b)
	ctx := context.Background()
	for b.Loop() {
		s, release, err := w.pool.Session(ctx, w.tg)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Run("true"); err != nil {
			b.Fatal(err)
		}
		release()
	}
}

// BenchmarkRun is host.run of the same command: the wrapper's overhead is
// the difference.
func BenchmarkRun(b *testing.B) {
	w := newWorld(b)
	ctx := context.Background()
	in := host.RunInput{Target: w.tg, Command: "true"}
	for b.Loop() {
		if _, err := w.acts.Run(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunWithOutputs writes one output.
func BenchmarkRunWithOutputs(b *testing.B) {
	w := newWorld(b)
	ctx := context.Background()
	in := host.RunInput{Target: w.tg, Command: `echo k=v >> "$KEDGE_OUTPUT"`, Env: map[string]string{"A": "b"}}
	for b.Loop() {
		if _, err := w.acts.Run(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}
