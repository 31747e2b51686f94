package host

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// Action names, as runbooks spell them in `action:`.
const (
	RunAction         = "host.run"
	WriteFileAction   = "host.write-file"
	RestoreFileAction = "host.restore-file"
	ReadFileAction    = "host.read-file"
	SystemdAction     = "host.systemd"
	// InstallBundleAction and RestoreBundleAction: bundle.go.
	InstallBundleAction = "host.install-bundle"
	RestoreBundleAction = "host.restore-bundle"
)

// Struct tags: `json` names the input as runbooks spell it in `with:`;
// `kedge:"required"` makes it mandatory; `kedge:"duration"` and
// `kedge:"mode"` constrain literal values at validation time; `doc` is the
// one-line help shown by `kedge actions`. The field named Target (json
// "target") is filled in by the workflow from the step's `on:` host and is
// never written in a runbook.

// RunInput runs a command or a script on one host.
type RunInput struct {
	Target          target.SSH        `json:"target"`
	Command         string            `json:"command,omitempty" kedge:"shell" doc:"shell command, run with sh -c (one of command/script); values go in env, not into the text"`
	Script          string            `json:"script,omitempty" kedge:"shell" doc:"shell script fed to sh -s (one of command/script); values go in env, not into the text"`
	Env             map[string]string `json:"env,omitempty" kedge:"env" doc:"environment variables exported before the command: literal names, values may be expressions"`
	Timeout         string            `json:"timeout,omitempty" kedge:"duration" doc:"kill the command after this long (default: the step's timeout)"`
	AcceptExitCodes []int             `json:"acceptExitCodes,omitempty" doc:"exit codes that count as success (default [0])"`
	OutputLimit     int               `json:"outputLimit,omitempty" doc:"bytes of stdout and of stderr kept (default 65536); the tail is kept"`
}

// RunResult is what host.run reports. Outputs holds the key=value lines the
// command wrote to the file named by $KEDGE_OUTPUT.
type RunResult struct {
	ExitCode        int               `json:"exitCode"`
	Stdout          string            `json:"stdout"`
	Stderr          string            `json:"stderr"`
	StdoutTruncated bool              `json:"stdoutTruncated"`
	StderrTruncated bool              `json:"stderrTruncated"`
	Outputs         map[string]string `json:"outputs"`
}

// WriteFileInput writes a file atomically (temp file + rename).
type WriteFileInput struct {
	Target        target.SSH `json:"target"`
	Path          string     `json:"path" kedge:"required" doc:"absolute path on the host"`
	Content       string     `json:"content,omitempty" doc:"file content (one of content/contentBase64)"`
	ContentBase64 string     `json:"contentBase64,omitempty" doc:"file content, base64 encoded"`
	Mode          string     `json:"mode,omitempty" kedge:"mode" doc:"octal permission bits (default 0644)"`
	NoBackup      bool       `json:"noBackup,omitempty" doc:"do not keep the previous content for undo"`
}

// WriteFileResult says what host.write-file did. Backup names the copy of
// the previous content kept on the host (empty when there was none or the
// file was unchanged); host.restore-file puts it back.
type WriteFileResult struct {
	Changed        bool   `json:"changed"`
	SHA256         string `json:"sha256"`
	Existed        bool   `json:"existed"`
	PreviousSHA256 string `json:"previousSha256"`
	Backup         string `json:"backup"`
}

// RestoreFileInput undoes a host.write-file: it puts the backup back, or
// removes the file when it did not exist before.
type RestoreFileInput struct {
	Target  target.SSH `json:"target"`
	Path    string     `json:"path" kedge:"required" doc:"the path host.write-file wrote"`
	Backup  string     `json:"backup,omitempty" doc:"the backup host.write-file reported (empty: remove the file)"`
	Existed bool       `json:"existed,omitempty" doc:"whether the file existed before the write"`
	Changed *bool      `json:"changed,omitempty" doc:"whether the write changed the file (false: nothing to undo)"`
}

// RestoreFileResult says what host.restore-file did.
type RestoreFileResult struct {
	Restored bool `json:"restored"`
	Removed  bool `json:"removed"`
}

// ReadFileInput reads one file.
type ReadFileInput struct {
	Target   target.SSH `json:"target"`
	Path     string     `json:"path" kedge:"required" doc:"absolute path on the host"`
	MaxBytes int        `json:"maxBytes,omitempty" doc:"refuse files larger than this (default 1 MiB)"`
	Missing  string     `json:"missing,omitempty" doc:"what a missing file is: error (default) or empty"`
}

// ReadFileResult carries the file's content (UTF-8 text; binary content is
// base64 encoded in ContentBase64 instead).
type ReadFileResult struct {
	Exists        bool   `json:"exists"`
	Content       string `json:"content"`
	ContentBase64 string `json:"contentBase64"`
	SHA256        string `json:"sha256"`
	Mode          string `json:"mode"`
	Size          int64  `json:"size"`
}

// SystemdInput drives one systemd unit: daemon-reload, enable/disable, a
// start/stop/restart, then wait until the unit is active (or inactive after
// stop).
type SystemdInput struct {
	Target       target.SSH `json:"target"`
	Unit         string     `json:"unit" kedge:"required" doc:"unit name, e.g. kubelet.service"`
	DaemonReload bool       `json:"daemonReload,omitempty" doc:"run systemctl daemon-reload first"`
	Enable       bool       `json:"enable,omitempty" doc:"enable the unit"`
	Disable      bool       `json:"disable,omitempty" doc:"disable the unit"`
	Action       string     `json:"action,omitempty" kedge:"enum=start|stop|restart|reload|none" doc:"start, stop, restart, reload or none"`
	WaitTimeout  string     `json:"waitTimeout,omitempty" kedge:"duration" doc:"how long to wait for the unit to settle (default 60s)"`
	// ExpectEnvironment, when set, is checked against the Environment
	// systemd reports for the unit (after the daemon-reload) before the
	// action: a drop-in that does not take effect stops here.
	ExpectEnvironment map[string]string `json:"expectEnvironment,omitempty" doc:"variables the unit's Environment must have, as systemd reports it after the daemon-reload, before the action runs"`
}

// SystemdResult reports the unit's state after the action.
type SystemdResult struct {
	ActiveState string `json:"activeState"`
	MainPID     int    `json:"mainPid"`
	// StartedAt is the host's clock (UTC, RFC 3339) just before the
	// action: what a restarted service's later reports are newer than.
	StartedAt string `json:"startedAt"`
}

func init() {
	spec.Register(spec.Row{Name: RunAction, Doc: "run a command or script on the host",
		In: RunInput{}, Out: RunResult{}, Timeout: 10 * time.Minute, OneOf: []string{"command", "script"},
		Summary: `run a command{{.On}}`})
}

func init() {
	spec.Register(spec.Row{Name: WriteFileAction, Doc: "write a file atomically (temp file + rename), keeping the previous content for undo",
		In: WriteFileInput{}, Out: WriteFileResult{}, Timeout: 5 * time.Minute, OneOf: []string{"content", "contentBase64"},
		Summary: `write {{.In "path"}}{{.On}}`})
}

func init() {
	spec.Register(spec.Row{Name: InstallBundleAction, Doc: "install a set of files all or none: shipped as one bundle, staged beside their targets, then renamed into place",
		In: InstallBundleInput{}, Out: InstallBundleResult{}, Timeout: 10 * time.Minute,
		Summary: `install {{.Count "files" "file"}}{{.On}}`})
}

func init() {
	spec.Register(spec.Row{Name: RestoreBundleAction, Doc: "undo a host.install-bundle: restore the replaced files, remove the created ones",
		In: RestoreBundleInput{}, Out: RestoreBundleResult{}, Timeout: 5 * time.Minute,
		Summary: `restore {{.Count "files" "file"}}{{.On}}`})
}

func init() {
	spec.Register(spec.Row{Name: RestoreFileAction, Doc: "undo a host.write-file: put the previous content back or remove the file",
		In: RestoreFileInput{}, Out: RestoreFileResult{}, Timeout: 5 * time.Minute,
		Summary: `restore {{.In "path"}}{{.On}}`})
}

func init() {
	spec.Register(spec.Row{Name: ReadFileAction, Doc: "read a file from the host",
		In: ReadFileInput{}, Out: ReadFileResult{}, Timeout: 5 * time.Minute,
		Summary: `read {{.In "path"}}{{.On}}`})
}

func init() {
	spec.Register(spec.Row{Name: SystemdAction, Doc: "daemon-reload, enable/disable, start/stop/restart a systemd unit and wait until it settles",
		In: SystemdInput{}, Out: SystemdResult{}, Timeout: 10 * time.Minute,
		Summary: `{{with .In "action"}}{{if eq . "none"}}configure{{else}}{{.}}{{end}}{{else}}configure{{end}} {{.In "unit"}}{{.On}}`})
}
