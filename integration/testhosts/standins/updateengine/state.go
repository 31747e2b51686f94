package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"kedge.dev/kedge/integration/testhosts/standins/osstate"
)

// attemptFile holds the daemon's current attempt: in /run, so a reboot
// forgets it as the daemon's memory is.
const attemptFile = "/run/update-engine-standin/attempt.json"

// attemptRecord is an update check and what it found.
type attemptRecord struct {
	Started time.Time `json:"started"`
	Version string    `json:"version,omitempty"` // empty: nothing offered
	Size    int64     `json:"size,omitempty"`
}

// The phases of an attempt, by time since it started.
const (
	checking    = 300 * time.Millisecond
	available   = 500 * time.Millisecond
	downloaded  = 1300 * time.Millisecond
	verified    = 1500 * time.Millisecond
	finalized   = 1700 * time.Millisecond
	defaultSize = 465567744
)

func (a *app) path(dir, name string) string { return a.root + dir + "/" + name }

// attempt starts an update check, unless one is running or done.
func (a *app) attempt() error {
	var cur attemptRecord
	if err := osstate.ReadJSON(a.root+attemptFile, &cur); err == nil {
		if op, _, _ := phase(cur, a.now()); op != "UPDATE_STATUS_IDLE" {
			return nil // already checking, updating or updated
		}
	}
	var booted osstate.Booted
	if err := osstate.ReadJSON(a.path(osstate.StateDir, osstate.BootedName), &booted); err != nil {
		return err
	}
	var offer osstate.Offer
	if err := osstate.ReadJSON(a.path(osstate.WorldDir, osstate.OfferName), &offer); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	rec := attemptRecord{Started: a.now()}
	if offer.Version != "" && offer.Version != booted.Deployment.Version {
		rec.Version, rec.Size = offer.Version, offer.Size
		if rec.Size == 0 {
			rec.Size = defaultSize
		}
		// The passive partition: what the next boot runs once the
		// update is complete (ReadyAt), as the harness applies it.
		staged := osstate.Staged{Deployment: osstate.NewDeployment(osstate.Flatcar, rec.Version), ReadyAt: rec.Started.Add(finalized), Size: rec.Size}
		if err := osstate.WriteJSON(a.path(osstate.StateDir, osstate.StagedName), staged); err != nil {
			return err
		}
	}
	return osstate.WriteJSON(a.root+attemptFile, rec)
}

// phase is the attempt's state at now: CURRENT_OP, PROGRESS and when the
// last check ended (0 while checking).
func phase(r attemptRecord, now time.Time) (string, float64, int64) {
	e := now.Sub(r.Started)
	checked := r.Started.Add(checking).Unix()
	switch {
	case e < checking:
		return "UPDATE_STATUS_CHECKING_FOR_UPDATE", 0, 0
	case r.Version == "":
		return "UPDATE_STATUS_IDLE", 0, checked
	case e < available:
		return "UPDATE_STATUS_UPDATE_AVAILABLE", 0, checked
	case e < downloaded:
		return "UPDATE_STATUS_DOWNLOADING", float64(e-available) / float64(downloaded-available), checked
	case e < verified:
		return "UPDATE_STATUS_VERIFYING", 1, checked
	case e < finalized:
		return "UPDATE_STATUS_FINALIZING", 1, checked
	}
	return "UPDATE_STATUS_UPDATED_NEED_REBOOT", 0, checked
}

// printStatus prints GetStatus's lines and returns CURRENT_OP.
func (a *app) printStatus() (string, error) {
	op, progress, checked, version, size := "UPDATE_STATUS_IDLE", 0.0, int64(0), "0.0.0", int64(0)
	var r attemptRecord
	switch err := osstate.ReadJSON(a.root+attemptFile, &r); {
	case err == nil:
		op, progress, checked = phase(r, a.now())
		if r.Version != "" && op != "UPDATE_STATUS_CHECKING_FOR_UPDATE" {
			version, size = r.Version, r.Size
		}
	case !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	fmt.Fprintf(a.stdout, "LAST_CHECKED_TIME=%d\nPROGRESS=%f\nCURRENT_OP=%s\nNEW_VERSION=%s\nNEW_SIZE=%d\n", checked, progress, op, version, size)
	return op, nil
}

// resetStatus forgets the attempt and the update written.
func (a *app) resetStatus() error {
	for _, p := range []string{a.root + attemptFile, a.path(osstate.StateDir, osstate.StagedName)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
