package main

import (
	"fmt"
	"slices"

	"kedge.dev/kedge/integration/testhosts/standins/osstate"
)

// markUnimplemented are apt-mark operations the stand-in does not have.
var markUnimplemented = map[string]bool{
	"auto": true, "manual": true, "minimize-manual": true, "showauto": true, "showmanual": true,
	"install": true, "remove": true, "deinstall": true, "purge": true, "showinstall": true, "showremove": true,
	"showdeinstall": true, "showpurge": true,
}

func (a *app) mark(args []string) int {
	c, msg := parse(args, nil)
	if msg != "" {
		return a.fail("%s", msg)
	}
	if len(c.operands) == 0 {
		fmt.Fprintln(a.stdout, "apt 2.6.1 (amd64)\nUsage: apt-mark [options] {auto|manual} pkg1 [pkg2 ...]")
		return 1
	}
	op, pkgs := c.operands[0], c.operands[1:]
	statusPath := a.path(osstate.StateDir, osstate.DpkgStatusName)
	installed, err := osstate.ReadDpkgStatus(statusPath)
	if err != nil {
		return a.fail("%v", err)
	}
	switch {
	case op == "showhold":
		var held []string
		for _, p := range installed {
			if p.Held && (len(pkgs) == 0 || slices.Contains(pkgs, p.Name)) {
				held = append(held, p.Name)
			}
		}
		slices.Sort(held)
		for _, n := range held {
			fmt.Fprintln(a.stdout, n)
		}
		return 0
	case op == "hold" || op == "unhold":
		return a.hold(statusPath, installed, pkgs, op == "hold")
	case markUnimplemented[op]:
		return a.fail("the test world's apt-mark does not implement %s", op)
	}
	return a.fail("Invalid operation %s", op)
}

func (a *app) hold(statusPath string, installed []osstate.Package, pkgs []string, on bool) int {
	if len(pkgs) == 0 {
		return a.fail("No packages found")
	}
	for _, n := range pkgs {
		if !slices.ContainsFunc(installed, func(p osstate.Package) bool { return p.Name == n }) {
			return a.fail("Unable to locate package %s", n)
		}
	}
	if a.euid != 0 {
		fmt.Fprintln(a.stderr, "dpkg: error: requested operation requires superuser privilege")
		return a.fail("Executing dpkg failed. Are you root?")
	}
	for _, n := range pkgs {
		i := slices.IndexFunc(installed, func(p osstate.Package) bool { return p.Name == n })
		switch {
		case on && installed[i].Held:
			fmt.Fprintf(a.stdout, "%s was already set on hold.\n", n)
		case on:
			fmt.Fprintf(a.stdout, "%s set on hold.\n", n)
		case installed[i].Held:
			fmt.Fprintf(a.stdout, "Canceled hold on %s.\n", n)
		default:
			fmt.Fprintf(a.stdout, "%s was already not on hold.\n", n)
		}
		installed[i].Held = on
	}
	if err := osstate.WriteFile(statusPath, osstate.FormatDpkgStatus(installed)); err != nil {
		return a.fail("%v", err)
	}
	return 0
}
