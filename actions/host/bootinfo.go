package host

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// BootInfoAction reads what a host runs since its last boot: the boot ID
// (a new one with every boot, so a reboot is seen to have happened), the
// OS and its version (os-release), and whether it waits for a reboot to
// apply an update.
const BootInfoAction = "host.boot-info"

// BootInfoInput names the host.
type BootInfoInput struct {
	Target target.SSH `json:"target"`
}

// BootInfoResult is what the host booted.
type BootInfoResult struct {
	// BootID is the kernel's boot ID (/proc/sys/kernel/random/boot_id).
	BootID string `json:"bootId"`
	// OS and Version are os-release's ID and VERSION_ID (debian 12,
	// flatcar 4152.2.3, fedora 42).
	OS      string `json:"os"`
	Version string `json:"version"`
	// RebootRequired: Debian's and Ubuntu's /run/reboot-required is
	// there (a package asked for a reboot).
	RebootRequired bool `json:"rebootRequired"`
	// Kernel is the running kernel's release
	// (/proc/sys/kernel/osrelease).
	Kernel string `json:"kernel"`
	// Updater is the host's own OS update tool, from os-release:
	// rpm-ostree (Fedora CoreOS), update_engine (Flatcar), apt (Debian,
	// Ubuntu and their kin); empty for an OS Kedge cannot update.
	Updater string `json:"updater,omitempty"`
	// Booted is the version an OS update moves, as Updater counts it:
	// the ostree deployment's version (OSTREE_VERSION), Flatcar's
	// VERSION_ID, or on apt hosts the kernel release.
	Booted string `json:"booted"`
	// HostTime is the host's clock when it answered (RFC 3339, UTC).
	HostTime string `json:"hostTime"`
}

// The OS update tools Kedge drives (BootInfoResult.Updater).
const (
	UpdaterRPMOSTree    = "rpm-ostree"
	UpdaterUpdateEngine = "update_engine"
	UpdaterApt          = "apt"
)

func init() {
	spec.Register(spec.Row{Name: BootInfoAction, Doc: "read the host's boot ID (new with every boot), its OS and version (os-release) and whether a package asked for a reboot (/run/reboot-required); changes nothing",
		In: BootInfoInput{}, Out: BootInfoResult{}, Timeout: time.Minute,
		Summary: `read the boot ID and OS{{.On}}`})
}
