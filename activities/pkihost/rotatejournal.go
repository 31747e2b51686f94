package pkihost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/pki"
	"kedge.dev/kedge/actions/target"
)

// DefaultRotationDir is where pki.rotate-ca keeps, on the host, the
// journal of each step it runs (Activities.RotationDir's default).
const DefaultRotationDir = "/var/lib/kedge/rotation"

// A step of a CA rotation writes its plan to the host before it installs
// anything, in a directory named after the run and the step's input
// (stepKey): every attempt of that step, the first or one after a lost
// worker, finds it there. The plan cannot be made again once the install
// began: the layout the step was given is from before it (a split signer
// looks unsplit), and the reissue stage's certificates are new at each
// issue. So an attempt that finds a plan installs that plan: the same
// bundle, so host.install-bundle backs up into the same directory, where
// the files the first attempt replaced already have their backup (a file
// already in place is not backed up again), and finishes the renames the
// lost attempt did not do. Its result is the one the first attempt would
// have returned: created and changed were decided from the host before
// the install, when the plan was written. An attempt that finds the step
// done returns its result and touches nothing.
//
// The journal's files: step.json, the plan (the bundle's content, keys
// with it: mode 0600, as the backups beside the host's files) until the
// install is done, then the result alone; and a mark, installed with the
// bundle, set back to pending before each install, so that the install
// always changes something and reports its backup directory even when the
// lost attempt had installed every file.
const (
	journalRecord  = "step.json"
	journalMark    = "installed"
	markPending    = "pending\n"
	markInstalled  = "installed\n"
	journalVersion = 1
)

// journal is one step's journal on its host.
type journal struct {
	a   *Activities
	in  pki.RotateCAInput
	dir string
}

// stepRecord is step.json.
type stepRecord struct {
	Version int `json:"version"`
	// Done: the install is done and Result is the step's.
	Done bool `json:"done"`
	// Files are the bundle to install, until Done.
	Files []journalFile `json:"files,omitempty"`
	// Result is the step's; its backup is known once Done.
	Result pki.RotateCAResult `json:"result"`
}

type journalFile struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	Mode    string `json:"mode,omitempty"`
	Owner   string `json:"owner,omitempty"`
}

// stepKey names a step of a run: the workflow run, the action, the node
// and what the step is to do (its input but how to reach the host and
// Vault, which a worker may fill in its own way). Every attempt of the
// step is given the same. Outside an activity there is no run: "".
func stepKey(ctx context.Context, in pki.RotateCAInput) (string, error) {
	if !activity.IsActivity(ctx) {
		return "", nil
	}
	info := activity.GetInfo(ctx)
	node := in.Target.Node
	in.Target, in.Vault = target.SSH{}, target.Vault{}
	b, err := json.Marshal(in)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, s := range []string{info.Namespace, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityType.Name, node} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// openJournal is the step's journal and what an earlier attempt wrote in
// it (nil: nothing, this attempt plans). The journal is nil outside a run.
func (a *Activities) openJournal(ctx context.Context, in pki.RotateCAInput) (*journal, *stepRecord, error) {
	key, err := stepKey(ctx, in)
	if err != nil || key == "" {
		return nil, nil, err
	}
	dir := a.RotationDir
	if dir == "" {
		dir = DefaultRotationDir
	}
	j := &journal{a: a, in: in, dir: path.Join(dir, key)}
	cur, err := a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: in.Target, Path: j.path(journalRecord), Missing: "empty", MaxBytes: 16 << 20})
	if err != nil || !cur.Exists {
		return j, nil, err
	}
	var rec stepRecord
	if err := json.Unmarshal([]byte(cur.Content), &rec); err != nil || rec.Version != journalVersion {
		return nil, nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s on %s is not a step journal this worker reads (version %d): remove it to plan the step again", j.path(journalRecord), in.Target.Node, rec.Version), errtype.FileOperationFailed, err)
	}
	return j, &rec, nil
}

func (j *journal) path(name string) string { return path.Join(j.dir, name) }

// begin records the plan of r before anything is installed, with what the
// install will create and whether it changes anything, both from the host
// as it is now. Nil when it changes nothing: there is nothing to resume.
func (j *journal) begin(ctx context.Context, r *rotation) (*stepRecord, error) {
	rec := &stepRecord{Version: journalVersion, Result: r.res}
	rec.Result.Files, rec.Result.Created = []string{}, []string{}
	for _, f := range r.files {
		cur, err := j.a.Hosts.ReadFile(ctx, host.ReadFileInput{Target: j.in.Target, Path: f.Path, Missing: "empty", MaxBytes: 16 << 20})
		if err != nil {
			return nil, err
		}
		if !cur.Exists {
			rec.Result.Created = append(rec.Result.Created, f.Path)
		}
		if !cur.Exists || !sameFile(cur, f) {
			rec.Result.Changed = true
		}
		rec.Result.Files = append(rec.Result.Files, f.Path)
		rec.Files = append(rec.Files, journalFile{Path: f.Path, Content: []byte(f.Content), Mode: f.Mode, Owner: f.Owner})
	}
	if !rec.Result.Changed {
		return nil, nil
	}
	return rec, j.write(ctx, rec, "plan")
}

// sameFile: the host's file has f's content and mode (what
// host.install-bundle leaves alone).
func sameFile(cur host.ReadFileResult, f host.BundleFile) bool {
	content := []byte(cur.Content)
	if cur.ContentBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(cur.ContentBase64)
		if err != nil {
			return false
		}
		content = b
	}
	return bytes.Equal(content, []byte(f.Content)) && octal(cur.Mode) == octal(f.Mode)
}

// octal is a mode as host.install-bundle reads it (0644 when not given).
func octal(mode string) uint64 {
	if mode == "" {
		return 0o644
	}
	m, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(mode, "0o"), "0O"), 8, 32)
	if err != nil {
		return 1 << 32 // no mode a file has
	}
	return m
}

func (j *journal) write(ctx context.Context, rec *stepRecord, what string) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := j.a.Hosts.WriteFile(ctx, host.WriteFileInput{Target: j.in.Target, Path: j.path(journalRecord), Content: string(b), Mode: "0600", NoBackup: true}); err != nil {
		return err
	}
	return j.a.lost(what)
}

// install installs the recorded plan (again: files already in place stay
// as they are, with the backup the first install made), then records the
// step done, without the plan's content.
func (j *journal) install(ctx context.Context, rec *stepRecord) (pki.RotateCAResult, error) {
	res := rec.Result
	mark := j.path(journalMark)
	if _, err := j.a.Hosts.WriteFile(ctx, host.WriteFileInput{Target: j.in.Target, Path: mark, Content: markPending, Mode: "0600", NoBackup: true}); err != nil {
		return res, err
	}
	if err := j.a.lost("mark"); err != nil {
		return res, err
	}
	files := make([]host.BundleFile, 0, len(rec.Files)+1)
	for _, f := range rec.Files {
		files = append(files, host.BundleFile{Path: f.Path, Content: string(f.Content), Mode: f.Mode, Owner: f.Owner})
	}
	files = append(files, host.BundleFile{Path: mark, Content: markInstalled, Mode: "0600"})
	installed, err := j.a.Hosts.InstallBundle(ctx, host.InstallBundleInput{Target: j.in.Target, Files: files})
	if err != nil {
		return res, err
	}
	if !installed.Changed || installed.Backup == "" {
		return res, temporal.NewApplicationError(fmt.Sprintf("the install on %s found %s already installed: it was not set pending", j.in.Target.Node, mark), errtype.FileOperationFailed)
	}
	if err := j.a.lost("install"); err != nil {
		return res, err
	}
	res.Backup = installed.Backup
	return res, j.write(ctx, &stepRecord{Version: journalVersion, Done: true, Result: res}, "done")
}

// lost is the test's worker lost after a write of the journal (what).
func (a *Activities) lost(what string) error {
	if a.loseAfter == nil {
		return nil
	}
	return a.loseAfter(what)
}
