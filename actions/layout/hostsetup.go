package layout

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// ContainerdConfig is containerd's configuration. Typhoon writes its own
// on Fedora CoreOS (the systemd cgroup driver the kubelet's
// cgroupDriver: systemd needs, SELinux labelling); Flatcar's containerd
// runs as the OS ships it.
const ContainerdConfig = "/etc/containerd/config.toml"

// ContainerdService is the unit of containerd, the kubelet's container
// runtime (--container-runtime-endpoint). On Fedora CoreOS nothing else
// starts it: Typhoon enables it. On Flatcar, the kubelet unit requires
// docker.service, which starts it.
const ContainerdService = "containerd.service"

// hostFiles are the files, besides the kubelet's own, that Typhoon
// v1.35.4's Fedora CoreOS worker template
// (bare-metal/fedora-coreos/kubernetes/worker/butane/worker.yaml) puts
// on a worker and that are the same on every worker (not /etc/hostname).
// The ones under modules-load.d and sysctl.d are applied as soon as they
// are written; the others take effect at the host's next boot, as on a
// host Typhoon provisions, where Ignition writes them before its first.
// Flatcar's worker template writes two of them (max-user-watches.conf,
// logind's inhibitors.conf).
var hostFiles = map[string][]string{
	KindTyphoonFlatcar: {
		"/etc/sysctl.d/max-user-watches.conf",
		"/etc/systemd/logind.conf.d/inhibitors.conf",
	},
	KindTyphoonFCOS: {
		ContainerdConfig,
		"/etc/modules-load.d/typhoon.conf",
		"/etc/sysctl.d/max-user-watches.conf",
		"/etc/sysctl.d/reverse-path-filter.conf",
		"/etc/systemd/logind.conf.d/inhibitors.conf",
		"/etc/systemd/network/50-flannel.link",
		"/etc/systemd/system.conf.d/accounting.conf",
	},
}

// requiredHostFiles are the host files a reference of the layout must
// have: Kedge does not invent them.
var requiredHostFiles = map[string][]string{
	KindTyphoonFCOS: {ContainerdConfig},
}

// HostSetup is what a host needs, besides the kubelet's own files, to run
// a kubelet as the reference's runs: its files, and what to do with them
// once written.
type HostSetup struct {
	// Files are the reference's host files (Mode left to the caller,
	// which knows the reference's modes).
	Files []CopyFile `json:"files"`
	// Modules are the kernel modules the files' modules-load.d entries
	// load at boot: to load now.
	Modules []string `json:"modules"`
	// SysctlFiles are the sysctl.d files among Files: to apply now.
	SysctlFiles []string `json:"sysctlFiles"`
	// Enable are the units to enable once the files are there: the ones
	// the reference's kubelet.service requires or wants through enable
	// links (Typhoon's wait-for-dns.service), then containerd on Fedora
	// CoreOS.
	Enable []string `json:"enable"`
	// Start are the units that must run before the kubelet starts:
	// containerd on Fedora CoreOS.
	Start []string `json:"start"`
}

// The kubelet's enable-link directories: systemctl enable makes a link
// there for a unit whose [Install] says RequiredBy= or WantedBy=
// kubelet.service.
var kubeletLinkDirs = []string{UnitDir + "/" + KubeletService + ".requires", UnitDir + "/" + KubeletService + ".wants"}

// ModuleRE is a kernel module's name.
var ModuleRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// unitNameRE is a unit's name as Kedge passes it to systemctl.
var unitNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:_.@\\-]*\.(service|socket|path|timer|mount|target)$`)

// ReadHostSetup reads, from a worker laid out as Typhoon lays it out
// (Discover's l), what another host needs besides the kubelet's files to
// run its kubelet the same way: on Fedora CoreOS, Typhoon's host files
// the reference has (containerd's configuration, required; the kernel
// modules and sysctls; logind, network and manager settings); on both
// flavours, the units its kubelet.service requires or wants through
// enable links (wait-for-dns.service), with their unit files when they
// are under /etc/systemd/system.
func ReadHostSetup(l Layout, r Reader) (HostSetup, error) {
	// Empty, not nil: the runbook passes each list on as a list.
	s := HostSetup{Files: []CopyFile{}, Modules: []string{}, SysctlFiles: []string{}, Enable: []string{}, Start: []string{}}
	if l.Kind != KindTyphoonFCOS && l.Kind != KindTyphoonFlatcar {
		return s, fmt.Errorf("host files: a %s host is not laid out by Typhoon", l.Kind)
	}
	for _, p := range hostFiles[l.Kind] {
		b, err := r.ReadFile(p)
		switch {
		case isNotExist(err) && slices.Contains(requiredHostFiles[l.Kind], p):
			return s, fmt.Errorf("%s is missing: Typhoon's Fedora CoreOS hosts run containerd with the configuration Typhoon writes there (systemd cgroups, SELinux); Kedge copies it from the reference and will not invent one", p)
		case isNotExist(err):
			continue
		case err != nil:
			return s, err
		}
		s.Files = append(s.Files, CopyFile{Path: p, Content: string(b)})
		switch path.Dir(p) {
		case "/etc/modules-load.d":
			mods, err := parseModules(p, string(b))
			if err != nil {
				return s, err
			}
			for _, m := range mods {
				if !slices.Contains(s.Modules, m) {
					s.Modules = append(s.Modules, m)
				}
			}
		case "/etc/sysctl.d":
			s.SysctlFiles = append(s.SysctlFiles, p)
		}
	}
	for _, dir := range kubeletLinkDirs {
		names, err := r.ReadDir(dir)
		if isNotExist(err) {
			continue
		}
		if err != nil {
			return s, err
		}
		slices.Sort(names)
		for _, n := range names {
			if !unitNameRE.MatchString(n) {
				return s, fmt.Errorf("%s/%s is not a unit Kedge can enable", dir, n)
			}
			if slices.Contains(s.Enable, n) {
				continue
			}
			p := UnitDir + "/" + n
			b, err := r.ReadFile(p)
			switch {
			case isNotExist(err):
				// A unit of the OS's own: enabled, not copied.
			case err != nil:
				return s, err
			default:
				s.Files = append(s.Files, CopyFile{Path: p, Content: string(b)})
			}
			s.Enable = append(s.Enable, n)
		}
	}
	if l.Kind == KindTyphoonFCOS {
		s.Enable = append(s.Enable, ContainerdService)
		s.Start = append(s.Start, ContainerdService)
	}
	return s, nil
}

// parseModules reads a modules-load.d file: one module a line, # and ;
// starting comments.
func parseModules(file, text string) ([]string, error) {
	var mods []string
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if !ModuleRE.MatchString(line) {
			return nil, fmt.Errorf("%s:%d: %q is not a kernel module's name", file, i+1, line)
		}
		mods = append(mods, line)
	}
	return mods, nil
}
