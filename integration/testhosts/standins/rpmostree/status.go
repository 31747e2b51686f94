package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"kedge.dev/kedge/integration/testhosts/standins/osstate"
)

// The host's stateroot and origin, as on Fedora CoreOS's stable stream.
const (
	osname = "fedora-coreos"
	origin = "fedora:fedora/x86_64/coreos/stable"
)

func (a *app) path(dir, name string) string { return a.root + dir + "/" + name }

// deployment is one row of status.
type deployment struct {
	osstate.Deployment
	booted, staged bool
}

// deployments are the host's deployments in rpm-ostree's order: the
// staged one (the default for the next boot), the booted one, the
// rollback.
func (a *app) deployments() ([]deployment, *osstate.Staged, error) {
	var booted osstate.Booted
	if err := osstate.ReadJSON(a.path(osstate.StateDir, osstate.BootedName), &booted); err != nil {
		return nil, nil, fmt.Errorf("loading sysroot: %w", err)
	}
	var out []deployment
	var staged *osstate.Staged
	var s osstate.Staged
	switch err := osstate.ReadJSON(a.path(osstate.StateDir, osstate.StagedName), &s); {
	case err == nil:
		staged = &s
		out = append(out, deployment{Deployment: s.Deployment, staged: true})
	case !errors.Is(err, os.ErrNotExist):
		return nil, nil, err
	}
	out = append(out, deployment{Deployment: booted.Deployment, booted: true})
	if booted.Rollback != nil && staged == nil {
		out = append(out, deployment{Deployment: *booted.Rollback})
	}
	return out, staged, nil
}

// jsonDeployment is a deployment as `status --json` prints it, in the
// real one's key order.
type jsonDeployment struct {
	Unlocked                       string         `json:"unlocked"`
	RequestedLocalPackages         []string       `json:"requested-local-packages"`
	BaseCommitMeta                 baseCommitMeta `json:"base-commit-meta"`
	BaseRemovals                   []string       `json:"base-removals"`
	GPGEnabled                     bool           `json:"gpg-enabled"`
	Origin                         string         `json:"origin"`
	OSName                         string         `json:"osname"`
	Pinned                         bool           `json:"pinned"`
	RequestedBaseLocalReplacements []string       `json:"requested-base-local-replacements"`
	Checksum                       string         `json:"checksum"`
	Booted                         bool           `json:"booted"`
	RegenerateInitramfs            bool           `json:"regenerate-initramfs"`
	ID                             string         `json:"id"`
	Version                        string         `json:"version"`
	RequestedPackages              []string       `json:"requested-packages"`
	RequestedBaseRemovals          []string       `json:"requested-base-removals"`
	Serial                         int            `json:"serial"`
	Timestamp                      int64          `json:"timestamp"`
	Staged                         bool           `json:"staged,omitempty"`
	Packages                       []string       `json:"packages"`
	BaseLocalReplacements          []string       `json:"base-local-replacements"`
}

type baseCommitMeta struct {
	Basearch string `json:"coreos-assembler.basearch"`
	Stream   string `json:"fedora-coreos.stream"`
	Version  string `json:"version"`
}

type jsonStatus struct {
	Deployments  []jsonDeployment `json:"deployments"`
	Transaction  *struct{}        `json:"transaction"`
	CachedUpdate *struct{}        `json:"cached-update"`
	UpdateDriver *struct{}        `json:"update-driver"`
}

// jsonGlibKey turns encoding/json's `"key": ` into json-glib's
// `"key" : `.
var jsonGlibKey = regexp.MustCompile(`(?m)^(\s*"[^"]+"):`)

func (a *app) status(args []string) int {
	set, rc := a.flags(args, map[string]string{"-v": "verbose", "--verbose": "verbose", "-b": "booted", "--booted": "booted",
		"--json": "json", "--pending-exit-77": "pending-exit-77", "-a": "all", "--advisories": "all"}, nil)
	if rc != 0 {
		return rc
	}
	deps, _, err := a.deployments()
	if err != nil {
		return a.fail("%v", err)
	}
	if set["json"] != "" {
		st := jsonStatus{Deployments: []jsonDeployment{}}
		for _, d := range deps {
			e := []string{}
			st.Deployments = append(st.Deployments, jsonDeployment{Unlocked: "none", RequestedLocalPackages: e,
				BaseCommitMeta: baseCommitMeta{Basearch: "x86_64", Stream: "stable", Version: d.Version}, BaseRemovals: e, GPGEnabled: true,
				Origin: origin, OSName: osname, RequestedBaseLocalReplacements: e, Checksum: d.Checksum, Booted: d.booted,
				ID: osname + "-" + d.Checksum + ".0", Version: d.Version, RequestedPackages: e, RequestedBaseRemovals: e,
				Timestamp: d.Timestamp, Staged: d.staged, Packages: e, BaseLocalReplacements: e})
		}
		out, _ := json.MarshalIndent(st, "", "  ")
		fmt.Fprintf(a.stdout, "%s\n", jsonGlibKey.ReplaceAll(out, []byte("$1 :")))
	} else {
		a.printStatus(deps, set["verbose"] != "", set["booted"] != "")
	}
	if set["pending-exit-77"] != "" && len(deps) > 1 && !deps[0].booted {
		return exitUnchanged
	}
	return 0
}

// keyWidth is the width status right-aligns its keys in
// (len("InactiveBaseReplacements")).
const keyWidth = 24

func (a *app) kv(key, value string) {
	fmt.Fprintf(a.stdout, "  %s%s: %s\n", strings.Repeat(" ", keyWidth-len(key)), key, value)
}

func (a *app) printStatus(deps []deployment, verbose, onlyBooted bool) {
	fmt.Fprintln(a.stdout, "State: idle")
	if verbose {
		fmt.Fprintln(a.stdout, "AutomaticUpdates: disabled")
	}
	fmt.Fprintln(a.stdout, "Deployments:")
	first := true
	for _, d := range deps {
		if onlyBooted && !d.booted {
			continue
		}
		if !first && !onlyBooted {
			fmt.Fprintln(a.stdout)
		}
		mark := " "
		if d.booted {
			mark = "●"
		}
		fmt.Fprintf(a.stdout, "%s %s\n", mark, origin)
		a.kv("Version", fmt.Sprintf("%s (%s)", d.Version, time.Unix(d.Timestamp, 0).UTC().Format("2006-01-02T15:04:05Z")))
		a.kv("Commit", d.Checksum)
		if verbose && (d.staged || first) {
			a.kv("Staged", map[bool]string{true: "yes", false: "no"}[d.staged])
		}
		if verbose {
			a.kv("StateRoot", osname)
		}
		first = false
	}
}
