package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"kedge.dev/kedge/integration/testhosts/standins/osstate"
)

// config is what apt-get's options set.
type config struct {
	yes, simulate, withNew bool
	quiet                  int
	operands               []string
}

// truth is apt's reading of a boolean configuration value.
func truth(v string) bool {
	switch strings.ToLower(v) {
	case "1", "yes", "true", "with", "on", "enable":
		return true
	}
	return false
}

func (c *config) setOption(kv string) string {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return "Option -o: Configuration item specification must have an =<val>."
	}
	switch strings.ToLower(k) {
	case "apt::get::assume-yes":
		c.yes = truth(v)
	case "apt::get::with-new-pkgs", "apt::get::upgrade-allow-new":
		c.withNew = truth(v)
	case "apt::get::simulate":
		c.simulate = truth(v)
	case "quiet":
		c.quiet, _ = strconv.Atoi(v)
	}
	return ""
}

// parse reads apt's command line: options anywhere, short ones
// clustered, -o's argument attached or next.
func parse(args []string, allowed map[string]bool) (*config, string) {
	c := &config{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			c.operands = append(c.operands, args[i+1:]...)
			return c, ""
		case strings.HasPrefix(a, "--"):
			name, value, hasValue := strings.Cut(a[2:], "=")
			switch {
			case (name == "yes" || name == "assume-yes") && allowed["y"]:
				c.yes = true
			case name == "quiet":
				c.quiet++
				if hasValue {
					c.quiet, _ = strconv.Atoi(value)
				}
			case (name == "simulate" || name == "just-print" || name == "dry-run" || name == "recon" || name == "no-act") && allowed["s"]:
				c.simulate = true
			case name == "with-new-pkgs" && allowed["y"]:
				c.withNew = true
			case name == "no-install-recommends" && allowed["y"]:
			case name == "option" && (hasValue || i+1 < len(args)):
				if !hasValue {
					i++
					value = args[i]
				}
				if msg := c.setOption(value); msg != "" {
					return nil, msg
				}
			default:
				return nil, fmt.Sprintf("Command line option %s is not understood in combination with the other options", a)
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			if v, ok := strings.CutPrefix(a, "-q="); ok {
				c.quiet, _ = strconv.Atoi(v)
				continue
			}
			for j := 1; j < len(a); j++ {
				switch ch := a[j]; {
				case ch == 'q':
					c.quiet++
				case ch == 'y' && allowed["y"]:
					c.yes = true
				case ch == 's' && allowed["s"]:
					c.simulate = true
				case ch == 'o':
					value := a[j+1:]
					if value == "" && i+1 < len(args) {
						i++
						value = args[i]
					}
					if msg := c.setOption(value); msg != "" {
						return nil, msg
					}
					j = len(a)
				default:
					return nil, fmt.Sprintf("Command line option '%c' [from %s] is not understood in combination with the other options.", ch, a)
				}
			}
		default:
			c.operands = append(c.operands, a)
		}
	}
	return c, ""
}

// unimplemented are apt-get operations the stand-in does not have.
var unimplemented = map[string]bool{
	"install": true, "reinstall": true, "remove": true, "purge": true, "autoremove": true, "autopurge": true,
	"source": true, "build-dep": true, "check": true, "clean": true, "autoclean": true, "download": true,
	"changelog": true, "satisfy": true, "markauto": true, "unmarkauto": true, "dselect-upgrade": true, "indextargets": true,
}

func (a *app) get(args []string) int {
	c, msg := parse(args, map[string]bool{"y": true, "s": true})
	if msg != "" {
		return a.fail("%s", msg)
	}
	if len(c.operands) == 0 {
		fmt.Fprintln(a.stdout, "apt 2.6.1 (amd64)\nUsage: apt-get [options] command\n\nMost used commands:\n  update - Retrieve new lists of packages\n  upgrade - Perform an upgrade\n  dist-upgrade - Distribution upgrade, see apt-get(8)")
		return 1
	}
	op := c.operands[0]
	switch {
	case op == "update":
		if len(c.operands) > 1 {
			return a.fail("The update command takes no arguments")
		}
		return a.update(c)
	case op == "upgrade" || op == "dist-upgrade" || op == "full-upgrade":
		if len(c.operands) > 1 {
			return a.fail("the test world's apt-get does not implement %s of single packages", op)
		}
		return a.upgrade(c, op != "upgrade" || c.withNew)
	case unimplemented[op]:
		return a.fail("the test world's apt-get does not implement %s", op)
	}
	return a.fail("Invalid operation %s", op)
}

// notRoot prints what apt-get prints when a simulation runs as a user.
func (a *app) simulationNote() {
	if a.euid != 0 {
		fmt.Fprintln(a.stdout, "NOTE: This is only a simulation!\n      apt-get needs root privileges for real execution.\n      Keep also in mind that locking is deactivated,\n      so don't depend on the relevance to the real current situation!")
	}
}

func (a *app) update(c *config) int {
	if a.euid != 0 {
		fmt.Fprintln(a.stderr, "E: Could not open lock file /var/lib/apt/lists/lock - open (13: Permission denied)")
		return a.fail("Unable to lock directory /var/lib/apt/lists/")
	}
	var offer osstate.Offer
	if err := osstate.ReadJSON(a.path(osstate.WorldDir, osstate.OfferName), &offer); err != nil && !errors.Is(err, os.ErrNotExist) {
		return a.fail("%v", err)
	}
	var lists []osstate.Package
	_ = osstate.ReadJSON(a.path(osstate.StateDir, osstate.AptListsName), &lists)
	same := slices.EqualFunc(lists, offer.Packages, func(x, y osstate.Package) bool {
		return x.Name == y.Name && x.Version == y.Version && slices.Equal(x.Depends, y.Depends)
	})
	if offer.Packages == nil {
		offer.Packages = []osstate.Package{}
	}
	if err := osstate.WriteJSON(a.path(osstate.StateDir, osstate.AptListsName), offer.Packages); err != nil {
		return a.fail("%v", err)
	}
	if c.quiet < 2 {
		if same && lists != nil {
			fmt.Fprintln(a.stdout, "Hit:1 kedge-lab bookworm InRelease")
		} else {
			fmt.Fprintln(a.stdout, "Get:1 kedge-lab bookworm InRelease [151 kB]")
		}
		fmt.Fprintln(a.stdout, "Reading package lists...")
	}
	return 0
}
