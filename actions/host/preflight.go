package host

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// PreflightAction checks, before a runbook changes anything, that the
// host can be reached and that Kedge's host actions will run there as
// root.
const PreflightAction = "host.preflight"

// PreflightInput names the host to check.
type PreflightInput struct {
	Target target.SSH `json:"target"`
}

// PreflightResult says who Kedge logs in as and who its actions run as.
type PreflightResult struct {
	User       string `json:"user"`       // the login user
	Become     string `json:"become"`     // "" or "sudo"
	RunsAsRoot bool   `json:"runsAsRoot"` // always true when the check passes
}

func init() {
	spec.Register(spec.Row{Name: PreflightAction, Doc: "check that the host is reachable and that host actions run there as root (sudo -n when the inventory says become: sudo); fails before anything changes",
		In: PreflightInput{}, Out: PreflightResult{}, Timeout: 2 * time.Minute,
		Summary: `check login and sudo{{.On}}`})
}
