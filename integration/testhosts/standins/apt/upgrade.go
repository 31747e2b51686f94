package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"kedge.dev/kedge/integration/testhosts/standins/osstate"
)

// plan is what an upgrade does.
type plan struct {
	upgrade []change // installed packages to a newer version
	install []change // NEW packages
	kept    []string // upgradable, kept back
}

type change struct {
	from string // the installed version ("" for a new package)
	to   osstate.Package
}

// planUpgrade plans an upgrade of installed to the versions the lists
// know: withNew lets it install new packages a newer version depends on.
func planUpgrade(installed, lists []osstate.Package, withNew bool) plan {
	known := map[string]osstate.Package{}
	for _, p := range lists {
		known[p.Name] = p
	}
	have := map[string]bool{}
	for _, p := range installed {
		have[p.Name] = true
	}
	var pl plan
	sorted := slices.Clone(installed)
	slices.SortFunc(sorted, func(x, y osstate.Package) int { return strings.Compare(x.Name, y.Name) })
	for _, p := range sorted {
		c, ok := known[p.Name]
		if !ok || osstate.CompareVersions(c.Version, p.Version) <= 0 {
			continue
		}
		var news []osstate.Package
		kept := p.Held
		for _, d := range c.Depends {
			if have[d] {
				continue
			}
			n, ok := known[d]
			if !ok || !withNew {
				kept = true
			}
			news = append(news, n)
		}
		if kept {
			pl.kept = append(pl.kept, p.Name)
			continue
		}
		for _, n := range news {
			if !slices.ContainsFunc(pl.install, func(x change) bool { return x.to.Name == n.Name }) {
				pl.install = append(pl.install, change{to: n})
			}
		}
		pl.upgrade = append(pl.upgrade, change{from: p.Version, to: c})
	}
	return pl
}

func names(cs []change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.to.Name)
	}
	return out
}

func (a *app) list(title string, pkgs []string) {
	if len(pkgs) > 0 {
		fmt.Fprintf(a.stdout, "%s\n  %s\n", title, strings.Join(pkgs, " "))
	}
}

func (a *app) upgrade(c *config, withNew bool) int {
	if a.euid != 0 && !c.simulate {
		fmt.Fprintln(a.stderr, "E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: Permission denied)")
		return a.fail("Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), are you root?")
	}
	statusPath := a.path(osstate.StateDir, osstate.DpkgStatusName)
	installed, err := osstate.ReadDpkgStatus(statusPath)
	if err != nil {
		return a.fail("%v", err)
	}
	var lists []osstate.Package
	if err := osstate.ReadJSON(a.path(osstate.StateDir, osstate.AptListsName), &lists); err != nil && !errors.Is(err, os.ErrNotExist) {
		return a.fail("%v", err)
	}
	pl := planUpgrade(installed, lists, withNew)
	if c.simulate {
		a.simulationNote()
	}
	if c.quiet < 2 {
		fmt.Fprintln(a.stdout, "Reading package lists...\nBuilding dependency tree...\nReading state information...\nCalculating upgrade...")
		a.list("The following packages have been kept back:", pl.kept)
		a.list("The following NEW packages will be installed:", names(pl.install))
		a.list("The following packages will be upgraded:", names(pl.upgrade))
		fmt.Fprintf(a.stdout, "%d upgraded, %d newly installed, 0 to remove and %d not upgraded.\n", len(pl.upgrade), len(pl.install), len(pl.kept))
	}
	all := append(slices.Clone(pl.install), pl.upgrade...)
	if len(all) == 0 {
		return 0
	}
	if c.simulate {
		for _, ch := range all {
			if ch.from != "" {
				fmt.Fprintf(a.stdout, "Inst %s [%s] (%s kedge-lab:bookworm [amd64])\n", ch.to.Name, ch.from, ch.to.Version)
			} else {
				fmt.Fprintf(a.stdout, "Inst %s (%s kedge-lab:bookworm [amd64])\n", ch.to.Name, ch.to.Version)
			}
		}
		for _, ch := range all {
			fmt.Fprintf(a.stdout, "Conf %s (%s kedge-lab:bookworm [amd64])\n", ch.to.Name, ch.to.Version)
		}
		return 0
	}
	if !c.yes && c.quiet < 2 {
		fmt.Fprint(a.stdout, "Do you want to continue? [Y/n] ")
		answer, err := a.stdin.ReadString('\n')
		answer = strings.TrimSpace(answer)
		if err != nil && answer == "" || answer != "" && !strings.EqualFold(answer[:1], "y") {
			fmt.Fprintln(a.stdout, "Abort.")
			return 1
		}
	}
	return a.install(statusPath, installed, all)
}

// install unpacks and sets up the changes as dpkg would, records them,
// and flags a reboot for a kernel.
func (a *app) install(statusPath string, installed []osstate.Package, all []change) int {
	for _, ch := range all {
		deb := fmt.Sprintf(".../%s_%s_amd64.deb", ch.to.Name, strings.ReplaceAll(ch.to.Version, ":", "%3a"))
		if ch.from == "" {
			fmt.Fprintf(a.stdout, "Selecting previously unselected package %s.\nPreparing to unpack %s ...\nUnpacking %s (%s) ...\n", ch.to.Name, deb, ch.to.Name, ch.to.Version)
		} else {
			fmt.Fprintf(a.stdout, "Preparing to unpack %s ...\nUnpacking %s (%s) over (%s) ...\n", deb, ch.to.Name, ch.to.Version, ch.from)
		}
	}
	next := slices.Clone(installed)
	var kernels []string
	for _, ch := range all {
		fmt.Fprintf(a.stdout, "Setting up %s (%s) ...\n", ch.to.Name, ch.to.Version)
		i := slices.IndexFunc(next, func(p osstate.Package) bool { return p.Name == ch.to.Name })
		p := osstate.Package{Name: ch.to.Name, Version: ch.to.Version, Depends: ch.to.Depends}
		if i < 0 {
			next = append(next, p)
		} else {
			p.Held = next[i].Held
			next[i] = p
		}
		if osstate.KernelRelease(ch.to.Name) != "" {
			kernels = append(kernels, ch.to.Name)
		}
	}
	if err := osstate.WriteFile(statusPath, osstate.FormatDpkgStatus(next)); err != nil {
		return a.fail("%v", err)
	}
	if len(kernels) > 0 {
		if err := a.flagReboot(kernels); err != nil {
			return a.fail("%v", err)
		}
	}
	return 0
}

// flagReboot writes /run/reboot-required and adds pkgs to
// /run/reboot-required.pkgs, as the kernel's postinst hooks do.
func (a *app) flagReboot(pkgs []string) error {
	if err := osstate.WriteFile(a.root+"/run/reboot-required", []byte("*** System restart required ***\n")); err != nil {
		return err
	}
	listed, _ := os.ReadFile(a.root + "/run/reboot-required.pkgs")
	have := strings.Fields(string(listed))
	for _, p := range pkgs {
		if !slices.Contains(have, p) {
			have = append(have, p)
		}
	}
	return osstate.WriteFile(a.root+"/run/reboot-required.pkgs", []byte(strings.Join(have, "\n")+"\n"))
}
