package host

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// PrepareNodeAction readies a host's kernel and units for its kubelet
// (host.prepare-node).
const PrepareNodeAction = "host.prepare-node"

// PrepareNodeInput is what to do on the host, in this order: stop and
// disable units (an undo), load kernel modules, apply sysctl files,
// daemon-reload, enable units, start units.
type PrepareNodeInput struct {
	Target      target.SSH `json:"target"`
	Modules     []string   `json:"modules,omitempty" doc:"kernel modules to load now (modprobe), as the host's modules-load.d files load them at boot"`
	SysctlFiles []string   `json:"sysctlFiles,omitempty" doc:"files under /etc/sysctl.d to apply now (sysctl -p FILE), as they are at boot"`
	Enable      []string   `json:"enable,omitempty" doc:"units to enable (after a daemon-reload)"`
	Start       []string   `json:"start,omitempty" doc:"units to start, in order, once enabled; each must be active after"`
	Restart     bool       `json:"restart,omitempty" doc:"restart the units of start that already run (their configuration changed)"`
	Stop        []string   `json:"stop,omitempty" doc:"units to stop first (the undo of a start)"`
	Disable     []string   `json:"disable,omitempty" doc:"units to disable first (the undo of an enable)"`
	Timeout     string     `json:"timeout,omitempty" kedge:"duration" doc:"give up after this long (default 5m)"`
}

// PrepareNodeResult says what host.prepare-node changed that its undo
// (the same action with stop and disable) takes back: kernel modules
// loaded and sysctls applied stay. A run that fails takes its own units
// back.
type PrepareNodeResult struct {
	// Enabled are the units of enable that were not enabled before.
	Enabled []string `json:"enabled"`
	// Started are the units of start that did not run before.
	Started []string `json:"started"`
}

func init() {
	spec.Register(spec.Row{Name: PrepareNodeAction, Doc: "ready a host for its kubelet: load kernel modules, apply sysctl files, daemon-reload, enable units, start (or restart) units and check they run; a failure takes back the units it enabled or started; with stop and disable, its undo",
		In: PrepareNodeInput{}, Out: PrepareNodeResult{}, Timeout: 10 * time.Minute,
		Summary: `{{if .Has "stop"}}take back the units enabled or started{{.On}}{{else}}prepare {{.Host}} for its kubelet{{end}}`})
}
