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
}

func init() {
	spec.Register(spec.Row{Name: BootInfoAction, Doc: "read the host's boot ID (new with every boot), its OS and version (os-release) and whether a package asked for a reboot (/run/reboot-required); changes nothing",
		In: BootInfoInput{}, Out: BootInfoResult{}, Timeout: time.Minute,
		Summary: `read the boot ID and OS{{.On}}`})
}
