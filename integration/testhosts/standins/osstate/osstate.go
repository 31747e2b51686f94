// Package osstate is what the test world's OS update stand-ins
// (rpm-ostree, update_engine_client, apt-get and apt-mark) and the test
// harness (integration/testhosts) both read and write: where a host's OS
// state is, and its file formats. The harness offers an update and, at a
// host's boot, applies what the stand-ins staged; the stand-ins stage it.
// Knowing the formats in one place keeps the two in step.
//
// Paths are as a host sees them. The world directory (WorldDir) is the
// harness's window into a running host (a bind mount of the host's own
// directory on the machine); StateDir is on the host's disk (its /var/lib
// overlay), so it lives across reboots as an OS's deployments, partitions
// and package database do.
//
// It is test infrastructure only: it never touches the machine's own
// package database or boot loader.
package osstate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Families of operating systems a test host can pretend to run.
const (
	Debian       = "debian"
	FedoraCoreOS = "fedora-coreos"
	Flatcar      = "flatcar"
)

// Paths inside a host.
const (
	// WorldDir is the harness's directory for the running host: the
	// update server's offer and the reboot request.
	WorldDir = "/run/kedge-lab"
	// OfferName (in WorldDir): the update the host's update server
	// offers (an Offer, JSON).
	OfferName = "offer.json"
	// RebootName (in WorldDir): written by a reboot (systemctl reboot)
	// just before the host goes down, so the harness boots it again
	// rather than taking its end for a crash.
	RebootName = "reboot"
	// RebootableName (in WorldDir): the harness can boot the host again;
	// without it (a host whose namespaces someone else made) a reboot is
	// refused.
	RebootableName = "rebootable"
	// StateDir is the OS's own state, on the host's disk.
	StateDir = "/var/lib/kedge-lab/os"
	// BootedName (in StateDir): what the host runs (a Booted, JSON).
	BootedName = "booted.json"
	// StagedName (in StateDir): what the next boot runs (a Staged, JSON),
	// for the image-based OSes.
	StagedName = "staged.json"
	// DpkgStatusName (in StateDir): the Debian family's installed
	// packages, in dpkg's status format (Package, Status, Version,
	// Depends), with holds as dpkg keeps them ("hold ok installed").
	DpkgStatusName = "dpkg-status"
	// AptListsName (in StateDir): the package versions the last
	// `apt-get update` found (an Offer's packages, JSON).
	AptListsName = "apt-lists.json"
)

// Offer is what a host's update server offers: for Fedora CoreOS and
// Flatcar an OS version (and, for Flatcar, the payload's size); for the
// Debian family package versions.
type Offer struct {
	Version string `json:"version,omitempty"`
	// Size is the update payload's size in bytes (Flatcar's NEW_SIZE);
	// 0 means a default.
	Size     int64     `json:"size,omitempty"`
	Packages []Package `json:"packages,omitempty"`
}

// Package is one package version in an Offer or installed.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Depends names packages this version needs (by name only); a name
	// not installed is a NEW package an upgrade must install.
	Depends []string `json:"depends,omitempty"`
	// Held: dpkg's "hold" selection (installed packages only).
	Held bool `json:"held,omitempty"`
}

// Deployment is one OS image a host has (Fedora CoreOS's deployments,
// Flatcar's partitions).
type Deployment struct {
	Version   string `json:"version"`
	Checksum  string `json:"checksum"`
	Timestamp int64  `json:"timestamp"`
}

// Booted is what a host runs since its last boot.
type Booted struct {
	Family string `json:"family"`
	// Deployment is the image booted (Fedora CoreOS, Flatcar).
	Deployment Deployment `json:"deployment,omitzero"`
	// Rollback is the image booted before (Fedora CoreOS's rollback
	// deployment), if any.
	Rollback *Deployment `json:"rollback,omitempty"`
	// Kernel is the kernel release booted (Debian family).
	Kernel string `json:"kernel,omitempty"`
}

// Staged is the image the next boot runs (Fedora CoreOS's staged
// deployment, Flatcar's updated passive partition).
type Staged struct {
	Deployment Deployment `json:"deployment"`
	// ReadyAt: a Flatcar update is written to the passive partition
	// over a while; a host that goes down before ReadyAt boots the old
	// one (zero: ready at once).
	ReadyAt time.Time `json:"readyAt,omitzero"`
	// Size is the payload's size (Flatcar's NEW_SIZE).
	Size int64 `json:"size,omitempty"`
}

// ReadJSON reads a JSON file into v; a missing file is os.ErrNotExist.
func ReadJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// WriteJSON writes v to path whole (through a temporary file renamed).
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(path, append(data, '\n'))
}

// WriteFile writes data to path whole, creating its directory.
func WriteFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp.%d", path, os.Getpid())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Exists reports whether path exists.
func Exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ReadDpkgStatus reads a dpkg status file: the installed packages, in
// the file's order.
func ReadDpkgStatus(path string) ([]Package, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Package
	for _, stanza := range strings.Split(string(data), "\n\n") {
		var p Package
		installed := false
		for _, line := range strings.Split(stanza, "\n") {
			k, v, ok := strings.Cut(line, ": ")
			if !ok {
				continue
			}
			switch k {
			case "Package":
				p.Name = v
			case "Version":
				p.Version = v
			case "Status":
				f := strings.Fields(v)
				installed = len(f) == 3 && f[2] == "installed"
				p.Held = len(f) > 0 && f[0] == "hold"
			case "Depends":
				for _, d := range strings.Split(v, ",") {
					if name := strings.Fields(d); len(name) > 0 {
						p.Depends = append(p.Depends, name[0])
					}
				}
			}
		}
		if p.Name != "" && installed {
			out = append(out, p)
		}
	}
	if len(out) == 0 && len(strings.TrimSpace(string(data))) > 0 {
		return nil, errors.New(path + ": no installed package")
	}
	return out, nil
}

// FormatDpkgStatus renders packages in dpkg's status format.
func FormatDpkgStatus(pkgs []Package) []byte {
	var b strings.Builder
	for i, p := range pkgs {
		if i > 0 {
			b.WriteString("\n")
		}
		want := "install"
		if p.Held {
			want = "hold"
		}
		fmt.Fprintf(&b, "Package: %s\nStatus: %s ok installed\nArchitecture: amd64\nVersion: %s\n", p.Name, want, p.Version)
		if len(p.Depends) > 0 {
			fmt.Fprintf(&b, "Depends: %s\n", strings.Join(p.Depends, ", "))
		}
	}
	return []byte(b.String())
}

// KernelRelease is the kernel release a package installs
// ("linux-image-6.1.0-21-amd64" installs 6.1.0-21-amd64), or "" for a
// package that is no kernel (a metapackage such as linux-image-amd64).
func KernelRelease(pkg string) string {
	rel, ok := strings.CutPrefix(pkg, "linux-image-")
	if !ok || rel == "" || rel[0] < '0' || rel[0] > '9' {
		return ""
	}
	return rel
}

// NewestKernel is the kernel release a boot loader boots among the
// installed packages: the kernel package with the highest version (the
// release breaking a tie), "" when there is none.
func NewestKernel(pkgs []Package) string {
	var best Package
	for _, p := range pkgs {
		if KernelRelease(p.Name) == "" {
			continue
		}
		if best.Name == "" || CompareVersions(p.Version, best.Version) > 0 ||
			CompareVersions(p.Version, best.Version) == 0 && p.Name > best.Name {
			best = p
		}
	}
	return KernelRelease(best.Name)
}

// NewDeployment is the image of an OS version as the update server
// builds it: its checksum (the ostree commit, a SHA-256 of the family and
// version here) and its timestamp (a Fedora CoreOS version's build date,
// 40.20240416.3.1 built on 2024-04-16, at noon UTC; otherwise the
// version's hash spread over 2024).
func NewDeployment(family, version string) Deployment {
	sum := sha256.Sum256([]byte(family + "\x00" + version))
	d := Deployment{Version: version, Checksum: hex.EncodeToString(sum[:])}
	if parts := strings.Split(version, "."); len(parts) > 1 && len(parts[1]) == 8 {
		if t, err := time.Parse("20060102", parts[1]); err == nil {
			d.Timestamp = t.Add(12 * time.Hour).Unix()
			return d
		}
	}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	d.Timestamp = start.Add(time.Duration(binary.BigEndian.Uint32(sum[:4])%(365*24*3600)) * time.Second).Unix()
	return d
}
