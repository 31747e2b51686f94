package testhosts

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// exitOf runs cmd and returns its output and exit status (-1 when it did
// not exit).
func exitOf(t *testing.T, c *ssh.Client, cmd string) (string, int) {
	t.Helper()
	out, err := run(c, cmd)
	var exit *ssh.ExitError
	switch {
	case err == nil:
		return out, 0
	case errors.As(err, &exit):
		return out, exit.ExitStatus()
	}
	t.Fatalf("%q: %v", cmd, err)
	return "", -1
}

// osRelease reads the host's /etc/os-release as KEY=value pairs.
func osReleaseOf(t *testing.T, c *ssh.Client) map[string]string {
	t.Helper()
	kv := map[string]string{}
	for _, line := range strings.Split(sh(t, c, "cat /etc/os-release"), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = strings.Trim(v, `"'`)
		}
	}
	return kv
}

func wantAbsent(t *testing.T, c *ssh.Client, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if out, code := exitOf(t, c, "command -v "+tool+"; sudo -n sh -c 'command -v "+tool+"'"); code == 0 {
			t.Errorf("%s is there: %s", tool, out)
		}
	}
}

type rpmOstreeStatus struct {
	Deployments []struct {
		ID, Checksum, Version, OSName, Origin string
		Booted, Staged                        bool
		Timestamp                             int64
	} `json:"deployments"`
}

func rpmOstreeJSON(t *testing.T, c *ssh.Client) rpmOstreeStatus {
	t.Helper()
	out := sh(t, c, "rpm-ostree status --json")
	var st rpmOstreeStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || !strings.Contains(out, `"deployments" : [`) {
		t.Fatalf("rpm-ostree status --json: %v\n%s", err, out)
	}
	return st
}

// A Fedora CoreOS host stages an update with rpm-ostree and boots it.
func TestFedoraCoreOSHostBootsTheStagedDeployment(t *testing.T) {
	l := rebootLab(t, "127.0.81.", FedoraCoreOS)
	h := l.Hosts[0]
	c := dial(t, l, h)
	if r := osReleaseOf(t, c); r["ID"] != "fedora" || r["VARIANT_ID"] != "coreos" || r["OSTREE_VERSION"] != FedoraCoreOSVersion || r["VERSION_ID"] != "40" {
		t.Errorf("os-release: %v", r)
	}
	wantAbsent(t, c, "apt-get", "apt-mark", "dpkg", "update_engine_client")
	st := rpmOstreeJSON(t, c)
	if len(st.Deployments) != 1 || !st.Deployments[0].Booted || st.Deployments[0].Version != FedoraCoreOSVersion || st.Deployments[0].OSName != "fedora-coreos" ||
		st.Deployments[0].ID != "fedora-coreos-"+st.Deployments[0].Checksum+".0" {
		t.Errorf("status: %+v", st)
	}
	if out, code := exitOf(t, c, "sudo -n rpm-ostree upgrade --unchanged-exit-77"); code != 77 || out != "No upgrade available." {
		t.Errorf("upgrade with nothing offered: %d %q", code, out)
	}
	const next = "40.20240504.3.0"
	if err := h.OfferUpdate(Update{Version: next}); err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]string{
		"rpm-ostree upgrade":                      "error: ",
		"sudo -n rpm-ostree upgrade --frobnicate": "error: Unknown option --frobnicate",
		"sudo -n rpm-ostree upgrade now":          "error: ",
		"sudo -n rpm-ostree frobnicate":           "error: Unknown command",
	} {
		if out, code := exitOf(t, c, cmd); code != 1 || !strings.HasPrefix(out, want) {
			t.Errorf("%s: exit %d %q; want 1 and %q", cmd, code, out, want)
		}
	}
	if out, code := exitOf(t, c, "sudo -n rpm-ostree upgrade --check"); code != 0 || !strings.Contains(out, "AvailableUpdate:\n        Version: "+next+" (2024-05-04T12:00:00Z)") {
		t.Errorf("upgrade --check: %d %q", code, out)
	}
	if st := rpmOstreeJSON(t, c); len(st.Deployments) != 1 {
		t.Errorf("--check staged something: %+v", st)
	}
	if out, code := exitOf(t, c, "sudo -n rpm-ostree upgrade"); code != 0 || !strings.Contains(out, "Staging deployment... done") {
		t.Fatalf("upgrade: %d %q", code, out)
	}
	st = rpmOstreeJSON(t, c)
	if len(st.Deployments) != 2 || !st.Deployments[0].Staged || st.Deployments[0].Booted || st.Deployments[0].Version != next || !st.Deployments[1].Booted {
		t.Errorf("status after upgrade: %+v", st)
	}
	if out := sh(t, c, "rpm-ostree status"); !strings.Contains(out, "Deployments:\n  fedora:fedora/x86_64/coreos/stable\n                   Version: "+next) || !strings.Contains(out, "● fedora:") {
		t.Errorf("status:\n%s", out)
	}
	if out, code := exitOf(t, c, "sudo -n rpm-ostree upgrade --unchanged-exit-77"); code != 77 {
		t.Errorf("upgrade again: %d %q", code, out)
	}
	before := sh(t, c, "cat /proc/sys/kernel/random/boot_id")

	c = rebootOverSSH(t, l, h, c)
	if after := sh(t, c, "cat /proc/sys/kernel/random/boot_id"); after == before {
		t.Error("same boot ID after the reboot")
	}
	if r := osReleaseOf(t, c); r["OSTREE_VERSION"] != next || r["VERSION"] != next+" (CoreOS)" {
		t.Errorf("os-release after the reboot: %v", r)
	}
	st = rpmOstreeJSON(t, c)
	if len(st.Deployments) != 2 || !st.Deployments[0].Booted || st.Deployments[0].Version != next || st.Deployments[0].Staged ||
		st.Deployments[1].Booted || st.Deployments[1].Version != FedoraCoreOSVersion {
		t.Errorf("status after the reboot: %+v", st)
	}

	// A reboot with nothing staged changes the boot ID alone.
	release, status, id := sh(t, c, "cat /etc/os-release"), sh(t, c, "rpm-ostree status --json"), sh(t, c, "cat /proc/sys/kernel/random/boot_id")
	c = rebootOverSSH(t, l, h, c)
	if sh(t, c, "cat /etc/os-release") != release || sh(t, c, "rpm-ostree status --json") != status || sh(t, c, "cat /proc/sys/kernel/random/boot_id") == id {
		t.Error("a reboot with nothing staged changed more than the boot ID")
	}
}

// updateEngineStatus reads update_engine_client -status's lines.
func updateEngineStatus(t *testing.T, c *ssh.Client) map[string]string {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Output("update_engine_client -status")
	if err != nil {
		t.Fatalf("update_engine_client -status: %v", err)
	}
	kv := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		kv[k] = v
	}
	if len(kv) != 5 || kv["LAST_CHECKED_TIME"] == "" || kv["PROGRESS"] == "" {
		t.Fatalf("-status printed %q", out)
	}
	return kv
}

// A Flatcar host checks for an update with update_engine_client, which
// downloads it over a while, and boots it.
func TestFlatcarHostBootsTheUpdatedPartition(t *testing.T) {
	l := rebootLab(t, "127.0.82.", Flatcar)
	h := l.Hosts[0]
	c := dial(t, l, h)
	if r := osReleaseOf(t, c); r["ID"] != "flatcar" || r["VERSION"] != FlatcarVersion || r["VERSION_ID"] != FlatcarVersion {
		t.Errorf("os-release: %v", r)
	}
	wantAbsent(t, c, "apt-get", "apt-mark", "rpm-ostree")
	if st := updateEngineStatus(t, c); st["CURRENT_OP"] != "UPDATE_STATUS_IDLE" || st["NEW_VERSION"] != "0.0.0" || st["LAST_CHECKED_TIME"] != "0" {
		t.Errorf("status: %v", st)
	}
	const next = "3815.2.5"
	if err := h.OfferUpdate(Update{Version: next, Size: 123456789}); err != nil {
		t.Fatal(err)
	}
	if out, code := exitOf(t, c, "update_engine_client -check_for_update"); code != 134 || !strings.Contains(out, "Check failed") {
		t.Errorf("-check_for_update without sudo: %d %q", code, out)
	}
	if out, code := exitOf(t, c, "sudo -n update_engine_client -frobnicate"); code != 1 || out != "ERROR: unknown command line flag 'frobnicate'" {
		t.Errorf("unknown flag: %d %q", code, out)
	}
	if out, code := exitOf(t, c, "sudo -n update_engine_client -check_for_update"); code != 0 || !strings.Contains(out, "Initiating update check and install.") {
		t.Fatalf("-check_for_update: %d %q", code, out)
	}
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for st := updateEngineStatus(t, c); st["CURRENT_OP"] != "UPDATE_STATUS_UPDATED_NEED_REBOOT"; st = updateEngineStatus(t, c) {
		seen[st["CURRENT_OP"]] = true
		if time.Now().After(deadline) {
			t.Fatalf("no UPDATE_STATUS_UPDATED_NEED_REBOOT within 30s: %v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !seen["UPDATE_STATUS_DOWNLOADING"] || seen["UPDATE_STATUS_IDLE"] {
		t.Errorf("the update went through %v; want a download on the way", seen)
	}
	if st := updateEngineStatus(t, c); st["NEW_VERSION"] != next || st["NEW_SIZE"] != "123456789" {
		t.Errorf("status when updated: %v", st)
	}

	c = rebootOverSSH(t, l, h, c)
	if r := osReleaseOf(t, c); r["VERSION"] != next || r["VERSION_ID"] != next {
		t.Errorf("os-release after the reboot: %v", r)
	}
	if st := updateEngineStatus(t, c); st["CURRENT_OP"] != "UPDATE_STATUS_IDLE" || st["NEW_VERSION"] != "0.0.0" {
		t.Errorf("status after the reboot: %v", st)
	}
	// Offered the version it runs, it finds nothing.
	sh(t, c, "sudo -n update_engine_client -update >/dev/null 2>&1")
	if st := updateEngineStatus(t, c); st["CURRENT_OP"] != "UPDATE_STATUS_IDLE" || st["LAST_CHECKED_TIME"] == "0" {
		t.Errorf("status after checking again: %v", st)
	}
}

// A Debian host upgrades with apt-get, holds what apt-mark holds, and
// boots the newest kernel it installed.
func TestDebianHostBootsTheNewKernel(t *testing.T) {
	l := rebootLab(t, "127.0.83.", Debian)
	h := l.Hosts[0]
	c := dial(t, l, h)
	if r := osReleaseOf(t, c); r["ID"] != "debian" || r["VERSION_ID"] != "12" {
		t.Errorf("os-release: %v", r)
	}
	wantAbsent(t, c, "rpm-ostree", "update_engine_client", "apt", "dpkg")
	machine, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	if got := sh(t, c, "cat /proc/sys/kernel/osrelease; uname -r"); got != DebianKernel+"\n"+strings.TrimSpace(string(machine)) {
		t.Errorf("osrelease and uname -r: %q", got)
	}
	const kernel = "6.1.0-21-amd64"
	if err := h.OfferUpdate(Update{Packages: []Package{
		{Name: "curl", Version: "7.88.1-10+deb12u6"},
		{Name: "openssl", Version: "3.0.13-1~deb12u1"},
		{Name: "linux-image-amd64", Version: "6.1.90-1", Depends: []string{"linux-image-" + kernel}},
		{Name: "linux-image-" + kernel, Version: "6.1.90-1"},
	}}); err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]string{
		"apt-get update":                       "E: Could not open lock file /var/lib/apt/lists/lock - open (13: Permission denied)",
		"apt-get -y upgrade":                   "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), are you root?",
		"sudo -n apt-get upgrade --frobnicate": "E: Command line option --frobnicate is not understood in combination with the other options",
		"sudo -n apt-get -z upgrade":           "E: Command line option 'z' [from -z] is not understood in combination with the other options.",
		"sudo -n apt-get frobnicate":           "E: Invalid operation frobnicate",
		"apt-mark hold openssl":                "E: Executing dpkg failed. Are you root?",
	} {
		if out, code := exitOf(t, c, cmd); code != 100 || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d %q; want 100 and %q", cmd, code, out, want)
		}
	}
	if out := sh(t, c, "sudo -n apt-mark hold openssl && apt-mark showhold"); out != "openssl set on hold.\nopenssl" {
		t.Errorf("hold: %q", out)
	}
	if out := sh(t, c, "sudo -n apt-get -y upgrade"); !strings.Contains(out, "0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.") {
		t.Errorf("upgrade before update: %q", out)
	}
	sh(t, c, "sudo -n apt-get update")
	if out, code := exitOf(t, c, "sudo -n apt-get upgrade </dev/null"); code != 1 || !strings.HasSuffix(out, "Do you want to continue? [Y/n] Abort.") {
		t.Errorf("upgrade without -y: %d %q", code, out)
	}
	out := sh(t, c, "sudo -n apt-get -y upgrade")
	if !strings.Contains(out, "The following packages have been kept back:\n  linux-image-amd64 openssl\nThe following packages will be upgraded:\n  curl\n1 upgraded, 0 newly installed, 0 to remove and 2 not upgraded.") ||
		!strings.Contains(out, "Unpacking curl (7.88.1-10+deb12u6) over (7.88.1-10+deb12u5) ...") {
		t.Errorf("upgrade -y:\n%s", out)
	}
	if _, code := exitOf(t, c, "test -e /run/reboot-required"); code == 0 {
		t.Error("/run/reboot-required without a kernel")
	}
	out = sh(t, c, "sudo -n apt-get -q -o Dpkg::Options::=--force-confold --with-new-pkgs upgrade -y")
	if !strings.Contains(out, "The following NEW packages will be installed:\n  linux-image-"+kernel+"\nThe following packages will be upgraded:\n  linux-image-amd64\n1 upgraded, 1 newly installed, 0 to remove and 1 not upgraded.") {
		t.Errorf("upgrade --with-new-pkgs:\n%s", out)
	}
	if got := sh(t, c, "cat /run/reboot-required.pkgs; test -e /run/reboot-required && echo required"); got != "linux-image-"+kernel+"\nrequired" {
		t.Errorf("reboot-required: %q", got)
	}
	if got := sh(t, c, "cat /proc/sys/kernel/osrelease"); got != DebianKernel {
		t.Errorf("osrelease before the reboot: %s", got)
	}

	c = rebootOverSSH(t, l, h, c)
	if got := sh(t, c, "cat /proc/sys/kernel/osrelease"); got != kernel {
		t.Errorf("osrelease after the reboot: %s", got)
	}
	if _, code := exitOf(t, c, "test -e /run/reboot-required || test -e /run/reboot-required.pkgs"); code == 0 {
		t.Error("reboot-required after the reboot")
	}
	// Its containers share its kernel: they see its boot and kernel.
	if err := h.AddImage(Image{Ref: "lab.example/sh:1", Entrypoint: []string{"/bin/sh"}}); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, c, "sudo -n docker run --rm lab.example/sh:1 -c 'cat /proc/sys/kernel/random/boot_id /proc/sys/kernel/osrelease'"); got != sh(t, c, "cat /proc/sys/kernel/random/boot_id")+"\n"+kernel {
		t.Errorf("a container sees %q", got)
	}
	if out := sh(t, c, "sudo -n apt-get -y dist-upgrade"); !strings.Contains(out, "The following packages have been kept back:\n  openssl\n0 upgraded, 0 newly installed, 0 to remove and 1 not upgraded.") {
		t.Errorf("dist-upgrade after the reboot:\n%s", out)
	}
	status, err := h.ReadFile("/var/lib/kedge-lab/os/dpkg-status")
	if err != nil || !strings.Contains(string(status), "Package: openssl\nStatus: hold ok installed\nArchitecture: amd64\nVersion: 3.0.11-1~deb12u2\n") {
		t.Errorf("the held package's record: %v\n%s", err, status)
	}
}

// Close in the middle of reboots leaves nothing behind: no process of a
// host, no mount of its files in any namespace.
func TestCloseDuringARebootLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real sshd hosts")
	}
	dir := t.TempDir()
	l, err := Start(t.Context(), Options{Count: 2, BaseIP: "127.0.84.", Dir: dir, OS: Debian})
	if err != nil {
		t.Fatal(err)
	}
	var procs []int
	for _, h := range l.Hosts {
		procs = append(procs, h.PID())
		procs = append(procs, descendants(h.PID())...)
	}
	// host-1 goes down and is closed before it boots again; host-2 is
	// closed between its reboot's request and its going down.
	c1, c2 := dial(t, l, l.Hosts[0]), dial(t, l, l.Hosts[1])
	sh(t, c1, "sudo -n systemctl reboot")
	for deadline := time.Now().Add(10 * time.Second); l.Hosts[0].PID() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("host-1 did not go down")
		}
	}
	sh(t, c2, "sudo -n systemctl reboot")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range l.Hosts {
		if err := h.WaitBoot(t.Context(), 2); err == nil || h.PID() != 0 {
			t.Errorf("%s after Close: boot %v, PID %d", h.Name, err, h.PID())
		}
	}
	time.Sleep(time.Second) // past when host-2 would have gone down and come back
	for _, p := range procs {
		if processAlive(p) {
			t.Errorf("process %d survived Close", p)
		}
	}
	mounts, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	for _, m := range mounts {
		data, _ := os.ReadFile(m)
		if strings.Contains(string(data), dir) {
			t.Errorf("%s still has the lab's mounts", m)
		}
	}
}
