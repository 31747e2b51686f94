package host

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// CheckReadableAction is the action name of CheckReadable.
const CheckReadableAction = "host.check-readable"

// FileReader is a file and one process that reads it: who that process
// runs as (layout.RunAs).
type FileReader struct {
	Path string `json:"path"`
	// Reader names the process, e.g. kube-apiserver.
	Reader string `json:"reader"`
	// User is a uid or user name ("0": root).
	User string `json:"user"`
	// Group is a gid or group name; "" is the user's primary group on
	// the host, 0 when the host does not know the user.
	Group string `json:"group,omitempty"`
	// Groups are supplementary groups (none when empty).
	Groups []string `json:"groups,omitempty"`
	// From says where the identity was read, for the message.
	From string `json:"from,omitempty"`
}

// CheckReadableInput lists files and who must be able to read them.
type CheckReadableInput struct {
	Target target.SSH   `json:"target"`
	Files  []FileReader `json:"files" kedge:"required" doc:"[{path, reader, user, group, groups, from}]: each file and a process that reads it, with who that process runs as (e.g. pki.renew-in-place's readers)"`
}

// CheckReadableResult lists what was checked: "PATH: READER (uid U gid G)".
type CheckReadableResult struct {
	Checked []string `json:"checked"`
}

func init() {
	spec.Register(spec.Row{Name: CheckReadableAction, Doc: "check each process can read its files as the user it runs as (opened under its uid, gid and groups with setpriv): before a restart, so a process that could not read its new files is never restarted onto them; fails naming the file, its owner and mode, the process and its uid",
		In: CheckReadableInput{}, Out: CheckReadableResult{}, Timeout: 2 * time.Minute,
		Summary: `check {{.Count "files" "file"}} can be read by their processes{{.On}}`})
}
