package host

import "kedge.dev/kedge/actions/target"

// BundleFile is one file of a bundle.
type BundleFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Mode    string `json:"mode,omitempty"` // octal, default 0644
	// Owner is the owner (user[:group], names or numbers) of a file the
	// bundle creates; a file it replaces keeps its own owner and group.
	Owner string `json:"owner,omitempty"`
}

// InstallBundleInput ships files to a host as one bundle and installs them
// all or none.
type InstallBundleInput struct {
	Target target.SSH   `json:"target"`
	Files  []BundleFile `json:"files" kedge:"required" doc:"the files: [{path, content, mode}]"`
	// Timeout bounds the remote unpacking.
	Timeout string `json:"timeout,omitempty" kedge:"duration" doc:"give up after this long (default 2m)"`
}

// InstallBundleResult says what host.install-bundle did. Backup holds the
// previous content of the files it replaced and Created the files that
// did not exist; host.restore-bundle undoes the install from them.
type InstallBundleResult struct {
	Changed bool     `json:"changed"`
	SHA256  string   `json:"sha256"`
	Files   []string `json:"files"`
	Backup  string   `json:"backup"`
	Created []string `json:"created"`
}

// RestoreBundleInput undoes a host.install-bundle.
type RestoreBundleInput struct {
	Target  target.SSH `json:"target"`
	Files   []string   `json:"files" doc:"the files the bundle installed"`
	Backup  string     `json:"backup,omitempty" doc:"the install's backup directory"`
	Created []string   `json:"created,omitempty" doc:"the files the install created (removed)"`
	Changed *bool      `json:"changed,omitempty" doc:"whether the install changed anything (false: nothing to undo)"`
}

// RestoreBundleResult says what host.restore-bundle did.
type RestoreBundleResult struct {
	Restored []string `json:"restored"`
	Removed  []string `json:"removed"`
}
