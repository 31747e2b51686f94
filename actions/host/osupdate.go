package host

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// OSUpdateAction stages the host's OS update with its own tool, and says
// whether a reboot is needed to apply it.
const OSUpdateAction = "host.os-update"

// OSUpdateInput names the host.
type OSUpdateInput struct {
	Target target.SSH `json:"target"`
	// CheckOnly reports what would be staged and stages nothing.
	CheckOnly bool `json:"checkOnly,omitempty" doc:"only report whether an update is available; stage nothing"`
	// BypassUpdateDriver stages with rpm-ostree even while Zincati,
	// registered as its update driver, runs (rpm-ostree upgrade
	// --bypass-driver). Without it such a host is refused
	// (UpdateDriverActive): Zincati would also stage, and reboot, on its
	// own terms.
	BypassUpdateDriver bool `json:"bypassUpdateDriver,omitempty" doc:"on Fedora CoreOS, stage even while Zincati drives the updates (rpm-ostree --bypass-driver); refused otherwise"`
}

// OSUpdateResult is what was staged and what the next boot will run.
type OSUpdateResult struct {
	// Updater is the tool used (BootInfoResult.Updater).
	Updater string `json:"updater"`
	// BootID is the boot ID when staged: host.reboot's notBootId.
	BootID string `json:"bootId"`
	// Booted is the running version; Next the one the next boot runs
	// (Booted when nothing is staged). Both as BootInfoResult.Booted
	// counts them.
	Booted string `json:"booted"`
	Next   string `json:"next"`
	// Staged: this call (or an earlier one) staged an update.
	Staged bool `json:"staged"`
	// RebootRequired: the host waits for a reboot to apply an update
	// (a staged deployment, UPDATE_STATUS_UPDATED_NEED_REBOOT, or
	// /run/reboot-required).
	RebootRequired bool `json:"rebootRequired"`
	// Held are apt's held packages, left as they were.
	Held []string `json:"held,omitempty"`
}

// RebootAction reboots the host and waits until it is back with a new
// boot ID.
const RebootAction = "host.reboot"

// RebootInput names the host and the boot it must leave.
type RebootInput struct {
	Target target.SSH `json:"target"`
	// NotBootID is the boot ID the host had before (host.os-update's or
	// host.boot-info's): a host that already booted since is not
	// rebooted again, so a retried call reboots once.
	NotBootID string `json:"notBootId" kedge:"required" doc:"the boot ID before the reboot: a host already booted since is not rebooted again"`
	// Within is how long the host may take to come back (default 15m).
	Within string `json:"within,omitempty" doc:"how long the host may take to come back (default 15m)"`
}

// RebootResult is what the host booted, and when, by its own clock, it
// was told to reboot.
type RebootResult struct {
	BootInfoResult
	// RebootedAt is the host's clock just before the reboot (RFC 3339):
	// a kubelet status posted after it is from the new boot. Empty when
	// the call found the host already booted since notBootId.
	RebootedAt string `json:"rebootedAt,omitempty"`
}

func init() {
	spec.Register(spec.Row{Name: OSUpdateAction,
		Doc: "stage the host's OS update with its own tool (apt-get upgrade keeping held packages held, rpm-ostree upgrade, update_engine_client) and say whether a reboot is needed and what version it boots",
		In:  OSUpdateInput{}, Out: OSUpdateResult{}, Timeout: 30 * time.Minute,
		Summary: `stage the OS update{{.On}}`})
	spec.Register(spec.Row{Name: RebootAction,
		Doc: "reboot the host (systemctl reboot) unless it already booted since notBootId, and wait until it answers again with a new boot ID",
		In:  RebootInput{}, Out: RebootResult{}, Timeout: 20 * time.Minute,
		Summary: `reboot{{.On}}`})
}
