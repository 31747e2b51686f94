package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"kedge.dev/kedge/integration/testhosts/standins/osstate"
)

func (a *app) upgrade(args []string) int {
	set, rc := a.flags(args, map[string]string{"--check": "check", "--preview": "preview", "--check-diff": "preview",
		"--unchanged-exit-77": "exit77", "--upgrade-unchanged-exit-77": "exit77", "-r": "reboot", "--reboot": "reboot",
		"--bypass-driver": "bypass", "--allow-downgrade": "downgrade", "-C": "cache-only", "--cache-only": "cache-only",
		"--download-only": "download-only"}, map[string]string{"--os": "os"})
	if rc != 0 {
		return rc
	}
	check := set["check"] != "" || set["preview"] != ""
	switch {
	case set["reboot"] != "" && set["preview"] != "":
		return a.fail("Cannot specify both --reboot and --preview")
	case set["reboot"] != "" && set["check"] != "":
		return a.fail("Cannot specify both --reboot and --check")
	case set["os"] != "" && set["os"] != osname:
		return a.fail("No deployments found for os %s", set["os"])
	case set["download-only"] != "":
		return a.fail("the test world's rpm-ostree does not implement --download-only")
	}
	// The client refuses before it asks the daemon (and polkit): with
	// --check too.
	if set["bypass"] == "" {
		if rc := a.drivenBy(); rc != 0 {
			return rc
		}
	}
	if a.euid != 0 {
		return a.fail("Authorization required, but no agent found")
	}
	deps, _, err := a.deployments()
	if err != nil {
		return a.fail("%v", err)
	}
	current := deps[0].Deployment // the default deployment
	var offer osstate.Offer
	if set["cache-only"] == "" {
		if err := osstate.ReadJSON(a.path(osstate.WorldDir, osstate.OfferName), &offer); err != nil && !errors.Is(err, os.ErrNotExist) {
			return a.fail("%v", err)
		}
	}
	var next osstate.Deployment
	if offer.Version != "" {
		next = osstate.NewDeployment(osstate.FedoraCoreOS, offer.Version)
	}
	if next.Checksum == "" || next.Checksum == current.Checksum {
		if check {
			fmt.Fprintln(a.stdout, "No updates available.")
			return exitUnchanged
		}
		fmt.Fprintln(a.stdout, "No upgrade available.")
		if set["exit77"] != "" {
			return exitUnchanged
		}
		return 0
	}
	if next.Timestamp < current.Timestamp && set["downgrade"] == "" {
		return a.fail("Upgrade target revision '%s' with timestamp '%s' is chronologically older than current revision '%s' with timestamp '%s'; use --allow-downgrade to permit",
			next.Checksum, stamp(next.Timestamp), current.Checksum, stamp(current.Timestamp))
	}
	if check {
		fmt.Fprintln(a.stdout, "AvailableUpdate:")
		fmt.Fprintf(a.stdout, "        Version: %s (%s)\n         Commit: %s\n", next.Version, stamp(next.Timestamp), next.Checksum)
		return 0
	}
	if err := osstate.WriteJSON(a.path(osstate.StateDir, osstate.StagedName), osstate.Staged{Deployment: next}); err != nil {
		return a.fail("%v", err)
	}
	fmt.Fprintln(a.stdout, "Staging deployment... done")
	if set["reboot"] != "" {
		if err := a.requestReboot(); err != nil {
			return a.fail("%v", err)
		}
		return 0
	}
	fmt.Fprintln(a.stdout, `Changes queued for next boot. Run "systemctl reboot" to start a reboot`)
	return 0
}

func stamp(t int64) string { return time.Unix(t, 0).UTC().Format("2006-01-02T15:04:05Z") }

func (a *app) requestReboot() error {
	if a.reboot != nil {
		return a.reboot()
	}
	out, err := exec.Command("systemctl", "reboot").CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemctl reboot: %w: %s", err, out)
	}
	return nil
}
