package testhosts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"kedge.dev/kedge/integration/testhosts/standins/osstate"
)

// OSFamily is the operating system a test host pretends to run: its
// /etc/os-release (in the host's /etc overlay) and the update tool
// installed at its real path (an overlay over the machine's /usr/bin,
// inside the host only):
//
//   - Debian: Debian 12; apt-get and apt-mark stand-ins. Its installed
//     packages start as DebianBase; the booted kernel release is the
//     newest installed linux-image-RELEASE package's, and shows in
//     /proc/sys/kernel/osrelease (uname -r stays the machine's kernel).
//   - FedoraCoreOS: Fedora CoreOS FedoraCoreOSVersion; an rpm-ostree
//     stand-in. os-release's VERSION_ID is the Fedora release (40), the
//     OS version is OSTREE_VERSION (and VERSION).
//   - Flatcar: Flatcar FlatcarVersion; an update_engine_client stand-in.
//
// On every host of a family the machine's apt, apt-get, apt-mark,
// apt-cache, apt-config, dpkg and dpkg-query are hidden, but for the
// family's own stand-ins: a Flatcar host has no apt-get. The host's
// update server offers what OfferUpdate says; the tool stages it, and
// the next boot (systemctl reboot, Reboot) runs it. The empty family
// (the default) keeps the machine's os-release and installs no tool.
type OSFamily string

// The families.
const (
	Debian       OSFamily = osstate.Debian
	FedoraCoreOS OSFamily = osstate.FedoraCoreOS
	Flatcar      OSFamily = osstate.Flatcar
)

// The versions a host of each family first boots.
const (
	FedoraCoreOSVersion = "40.20240416.3.1"
	FlatcarVersion      = "3815.2.2"
	// DebianKernel is the kernel release of DebianBase's kernel package.
	DebianKernel = "6.1.0-18-amd64"
)

// Update is what a host's update server offers (OfferUpdate): Version
// (and, for Flatcar, Size) for Fedora CoreOS and Flatcar, Packages for
// Debian.
type Update = osstate.Offer

// Package is a package version (Debian family).
type Package = osstate.Package

// DebianBase is the packages a Debian host has installed when it first
// boots: a kernel (linux-image-amd64, the metapackage, depending on
// linux-image-DebianKernel) among a few others.
func DebianBase() []Package {
	return []Package{
		{Name: "base-files", Version: "12.4+deb12u5"},
		{Name: "curl", Version: "7.88.1-10+deb12u5"},
		{Name: "linux-image-" + DebianKernel, Version: "6.1.76-1"},
		{Name: "linux-image-amd64", Version: "6.1.76-1", Depends: []string{"linux-image-" + DebianKernel}},
		{Name: "openssh-server", Version: "1:9.2p1-2+deb12u2"},
		{Name: "openssl", Version: "3.0.11-1~deb12u2"},
	}
}

// osTools are the update tools of each family, by file name (built
// from standinPackages).
var osTools = map[OSFamily][]string{
	Debian:       {"apt-get", "apt-mark"},
	FedoraCoreOS: {"rpm-ostree"},
	Flatcar:      {"update_engine_client"},
}

// hiddenTools are the machine's package tools no host of a family sees
// (but for the family's own stand-ins).
var hiddenTools = []string{"apt", "apt-get", "apt-mark", "apt-cache", "apt-config", "dpkg", "dpkg-query"}

func isOSTool(name string) bool {
	for _, tools := range osTools {
		if slices.Contains(tools, name) {
			return true
		}
	}
	return false
}

func (f OSFamily) valid() error {
	if f == "" || osTools[f] != nil {
		return nil
	}
	return fmt.Errorf("unknown OS family %q (want %s, %s or %s)", f, Debian, FedoraCoreOS, Flatcar)
}

// OS is the family the host pretends to run ("" for the machine's).
func (h *Host) OS() OSFamily { return h.os }

// stateDir is the host's osstate.StateDir as the machine sees it, in the
// host's /var/lib overlay's upper directory: the harness reads and
// writes it only while the host is down.
func (h *Host) stateDir() string {
	return filepath.Join(h.dir, "varlib-upper", strings.TrimPrefix(osstate.StateDir, "/var/lib/"))
}

// prepareOS installs the family's tools and its first state, and on a
// Fedora CoreOS host with zincati its unit, enabled.
func (h *Host) prepareOS(bins map[string]string, zincati bool) error {
	if h.os == "" {
		return nil
	}
	usrBin := filepath.Join(h.dir, "usr-bin")
	if err := os.MkdirAll(usrBin, 0o755); err != nil {
		return err
	}
	for _, name := range hiddenTools {
		if slices.Contains(osTools[h.os], name) {
			continue
		}
		// An overlay whiteout: a character device 0/0.
		if err := syscall.Mknod(filepath.Join(usrBin, name), syscall.S_IFCHR, 0); err != nil {
			return fmt.Errorf("hide %s: %w", name, err)
		}
	}
	for _, name := range osTools[h.os] {
		data, err := os.ReadFile(bins[name])
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(usrBin, name), data, 0o755); err != nil {
			return err
		}
	}
	booted := osstate.Booted{Family: string(h.os)}
	switch h.os {
	case FedoraCoreOS:
		booted.Deployment = osstate.NewDeployment(string(h.os), FedoraCoreOSVersion)
		if zincati {
			if err := h.installZincati(bins); err != nil {
				return err
			}
			h.zincati = true
		}
	case Flatcar:
		booted.Deployment = osstate.NewDeployment(string(h.os), FlatcarVersion)
	case Debian:
		if err := osstate.WriteFile(filepath.Join(h.stateDir(), osstate.DpkgStatusName), osstate.FormatDpkgStatus(DebianBase())); err != nil {
			return err
		}
	}
	return osstate.WriteJSON(filepath.Join(h.stateDir(), osstate.BootedName), booted)
}

// zincatiUnit is zincati.service as the test world runs it: the real
// one runs /usr/libexec/zincati agent as the zincati user; here the
// stand-in, at /usr/bin (the overlay the hosts' tools are in), as root,
// which is how it can write rpm-ostree's registration.
const zincatiUnit = `[Unit]
Description=Zincati Update Agent (the test world's)

[Service]
ExecStart=/usr/bin/zincati agent
Restart=on-failure

[Install]
WantedBy=multi-user.target
`

// installZincati installs the zincati stand-in (rpm-ostree's binary
// under that name) and its unit, enabled as Fedora CoreOS enables it.
func (h *Host) installZincati(bins map[string]string) error {
	data, err := os.ReadFile(bins["rpm-ostree"])
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(h.dir, "usr-bin", "zincati"), data, 0o755); err != nil {
		return err
	}
	units := filepath.Join(h.dir, "etc-upper", "systemd", "system")
	if err := os.MkdirAll(filepath.Join(units, "multi-user.target.wants"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(units, "zincati.service"), []byte(zincatiUnit), 0o644); err != nil {
		return err
	}
	// As systemctl enable links it: an absolute path.
	return os.Symlink("/etc/systemd/system/zincati.service", filepath.Join(units, "multi-user.target.wants", "zincati.service"))
}

// OfferUpdate makes the host's update server offer u from now on (an
// empty Update withdraws the offer): for Fedora CoreOS and Flatcar an OS
// version, for Debian package versions, which `apt-get update` then
// finds. The host may be up or down.
func (h *Host) OfferUpdate(u Update) error {
	path := filepath.Join(h.dir, worldDir, osstate.OfferName)
	switch {
	case h.os == "":
		return fmt.Errorf("offer an update to %s: the host has no OS family", h.Name)
	case u.Version == "" && len(u.Packages) == 0:
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	case h.os == Debian && (u.Version != "" || len(u.Packages) == 0):
		return fmt.Errorf("offer an update to %s: a Debian host is offered packages, not a version", h.Name)
	case h.os != Debian && (u.Version == "" || len(u.Packages) > 0):
		return fmt.Errorf("offer an update to %s: a %s host is offered a version, not packages", h.Name, h.os)
	}
	for _, p := range u.Packages {
		if p.Name == "" || p.Version == "" {
			return fmt.Errorf("offer an update to %s: package %+v needs a name and a version", h.Name, p)
		}
	}
	return osstate.WriteJSON(path, u)
}

// osBoot applies, as the host boots, what its update tool staged: the
// staged deployment becomes the booted one (Fedora CoreOS; Flatcar's
// only when its update was complete before the host went down, at down),
// or the newest installed kernel boots (Debian); then os-release says
// what runs.
func (h *Host) osBoot(down time.Time) error {
	if h.os == "" {
		return nil
	}
	bootedPath, stagedPath := filepath.Join(h.stateDir(), osstate.BootedName), filepath.Join(h.stateDir(), osstate.StagedName)
	var booted osstate.Booted
	if err := osstate.ReadJSON(bootedPath, &booted); err != nil {
		return err
	}
	var staged osstate.Staged
	switch err := osstate.ReadJSON(stagedPath, &staged); {
	case err == nil:
		if staged.ReadyAt.IsZero() || !down.IsZero() && !down.Before(staged.ReadyAt) {
			previous := booted.Deployment
			booted.Deployment, booted.Rollback = staged.Deployment, &previous
		}
		if err := os.Remove(stagedPath); err != nil {
			return err
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	if h.os == Debian {
		pkgs, err := osstate.ReadDpkgStatus(filepath.Join(h.stateDir(), osstate.DpkgStatusName))
		if err != nil {
			return err
		}
		booted.Kernel = osstate.NewestKernel(pkgs)
		if err := os.WriteFile(filepath.Join(h.dir, bootDir, "osrelease"), []byte(booted.Kernel+"\n"), 0o444); err != nil {
			return err
		}
	}
	if err := osstate.WriteJSON(bootedPath, booted); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(h.dir, "etc-upper", "os-release"), []byte(osRelease(h.os, booted.Deployment.Version)), 0o644)
}

// osRelease is the family's /etc/os-release for a version, as the real
// OS writes it (without its web addresses).
func osRelease(f OSFamily, version string) string {
	switch f {
	case FedoraCoreOS:
		major, _, _ := strings.Cut(version, ".")
		return fmt.Sprintf(`NAME="Fedora Linux"
VERSION="%[1]s (CoreOS)"
ID=fedora
VERSION_ID=%[2]s
VERSION_CODENAME=""
PLATFORM_ID="platform:f%[2]s"
PRETTY_NAME="Fedora CoreOS %[1]s"
ANSI_COLOR="0;38;2;60;110;180"
LOGO=fedora-logo-icon
CPE_NAME="cpe:/o:fedoraproject:fedora:%[2]s"
DEFAULT_HOSTNAME="localhost"
REDHAT_BUGZILLA_PRODUCT="Fedora"
REDHAT_BUGZILLA_PRODUCT_VERSION=%[2]s
REDHAT_SUPPORT_PRODUCT="Fedora"
REDHAT_SUPPORT_PRODUCT_VERSION=%[2]s
VARIANT="CoreOS"
VARIANT_ID=coreos
OSTREE_VERSION='%[1]s'
`, version, major)
	case Flatcar:
		return fmt.Sprintf(`NAME="Flatcar Container Linux by Kinvolk"
ID=flatcar
ID_LIKE=coreos
VERSION=%[1]s
VERSION_ID=%[1]s
BUILD_ID=%[1]s
SYSEXT_LEVEL=1.0
PRETTY_NAME="Flatcar Container Linux by Kinvolk %[1]s (Oklo)"
ANSI_COLOR="38;5;75"
FLATCAR_BOARD="amd64-usr"
CPE_NAME="cpe:2.3:o:flatcar-linux:flatcar_linux:%[1]s:*:*:*:*:*:*:*"
`, version)
	}
	return `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
`
}
