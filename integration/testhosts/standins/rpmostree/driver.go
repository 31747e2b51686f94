package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"kedge.dev/kedge/integration/testhosts/standins/osstate"
)

// The update driver's registration, as rpm-ostreed keeps it: in /run, so
// a boot forgets it and the driver registers again when it starts.
const (
	driverDir  = "/run/rpm-ostree"
	driverName = "update-driver.json"
)

// driver is a registered update driver: its name and its systemd unit.
type driver struct {
	Name string `json:"name"`
	Unit string `json:"unit"`
}

// drivenBy refuses, as the real rpm-ostree does, an operation while an
// update driver is registered and its unit is active: "error: Updates
// and deployments are driven by NAME (UNIT)", with where to read about
// it and --bypass-driver, exit 1. It returns 0 when nothing drives the
// updates (none registered, or its unit not active).
func (a *app) drivenBy() int {
	var d driver
	switch err := osstate.ReadJSON(a.path(driverDir, driverName), &d); {
	case errors.Is(err, os.ErrNotExist):
		return 0
	case err != nil:
		return a.fail("%v", err)
	}
	if !a.unitActive(d.Unit) {
		return 0
	}
	return a.fail("Updates and deployments are driven by %s (%s)\nSee %s's documentation\nUse --bypass-driver to bypass %s and perform the operation anyways", d.Name, d.Unit, d.Name, d.Name)
}

func (a *app) unitActive(unit string) bool {
	if a.active != nil {
		return a.active(unit)
	}
	return exec.Command("systemctl", "is-active", "--quiet", unit).Run() == nil
}

// zincati is the test world's Zincati as far as rpm-ostree sees it: it
// registers as the update driver when it starts (zincati.service) and
// runs until it is stopped. It never looks for an update and never
// reboots: a test that wants Zincati's updates drives its FleetLock
// client itself.
func (a *app) zincati(args []string) int {
	if len(args) == 0 || args[0] != "agent" || len(args) > 2 || len(args) == 2 && args[1] != "-v" && args[1] != "-vv" && args[1] != "-vvv" {
		fmt.Fprintln(a.stderr, "Usage: zincati agent [-v]")
		return exitError
	}
	if err := osstate.WriteJSON(a.path(driverDir, driverName), driver{Name: "Zincati", Unit: "zincati.service"}); err != nil {
		return a.fail("failed to register as driver: %v", err)
	}
	fmt.Fprintln(a.stdout, "registered as the update driver for rpm-ostree")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	return 0
}
