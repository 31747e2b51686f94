package sshhost

import (
	"context"
	"os"
	"strings"
	"testing"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
)

func TestParseBootInfo(t *testing.T) {
	const id = "0b6a3c5e-8f3b-4c1e-9d5a-2f6e1a7b9c01\n"
	const k = "--- kernel\n6.1.0-26-amd64\n--- time\n2026-12-05T01:02:03Z\n"
	for _, tc := range []struct {
		name, out string
		want      host.BootInfoResult
		bad       bool
	}{
		{name: "debian waiting for a reboot", out: id + "--- os-release\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\n" + k + "--- reboot\nrequired\n",
			want: host.BootInfoResult{BootID: strings.TrimSpace(id), OS: "debian", Version: "12", RebootRequired: true, Kernel: "6.1.0-26-amd64", HostTime: "2026-12-05T01:02:03Z", Updater: "apt", Booted: "6.1.0-26-amd64"}},
		{name: "ubuntu kin", out: id + "--- os-release\nID=pop\nID_LIKE=\"ubuntu debian\"\nVERSION_ID=\"22.04\"\n" + k + "--- reboot\n",
			want: host.BootInfoResult{BootID: strings.TrimSpace(id), OS: "pop", Version: "22.04", Kernel: "6.1.0-26-amd64", HostTime: "2026-12-05T01:02:03Z", Updater: "apt", Booted: "6.1.0-26-amd64"}},
		{name: "flatcar", out: id + "--- os-release\nNAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nID_LIKE=coreos\nVERSION_ID=4152.2.3\n" + k + "--- reboot\n",
			want: host.BootInfoResult{BootID: strings.TrimSpace(id), OS: "flatcar", Version: "4152.2.3", Kernel: "6.1.0-26-amd64", HostTime: "2026-12-05T01:02:03Z", Updater: "update_engine", Booted: "4152.2.3"}},
		{name: "fedora coreos", out: id + "--- os-release\nID=fedora\nVERSION=\"42.20250901.3.0 (CoreOS)\"\nVERSION_ID=42\nVARIANT_ID=coreos\nOSTREE_VERSION='42.20250901.3.0'\n" + k + "--- reboot\n",
			want: host.BootInfoResult{BootID: strings.TrimSpace(id), OS: "fedora", Version: "42", Kernel: "6.1.0-26-amd64", HostTime: "2026-12-05T01:02:03Z", Updater: "rpm-ostree", Booted: "42.20250901.3.0"}},
		{name: "single quotes and comments", out: id + "--- os-release\n# ID=nope\nID='fedora'\nVERSION_ID='42'\n" + k + "--- reboot\n",
			want: host.BootInfoResult{BootID: strings.TrimSpace(id), OS: "fedora", Version: "42", Kernel: "6.1.0-26-amd64", HostTime: "2026-12-05T01:02:03Z", Booted: "42"}},
		{name: "no sections", out: id, bad: true},
		{name: "no kernel", out: id + "--- os-release\nID=debian\n--- reboot\n", bad: true},
		{name: "no boot ID", out: "--- os-release\nID=debian\n" + k + "--- reboot\n", bad: true},
	} {
		got, err := parseBootInfo(tc.out)
		if (err != nil) != tc.bad || !tc.bad && got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

// Over SSH, the action reads the host's own boot ID and os-release (the
// test's SSH server runs on this machine).
func TestBootInfoReadsTheHost(t *testing.T) {
	w := newWorld(t)
	res, err := w.acts.BootInfo(context.Background(), host.BootInfoInput{Target: w.tg})
	if err != nil {
		t.Fatal(err)
	}
	id, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skip("no boot ID here:", err)
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	if res.BootID != strings.TrimSpace(string(id)) || res.OS == "" || res.Kernel != strings.TrimSpace(string(kernel)) {
		t.Errorf("got %+v; boot ID here %s", res, id)
	}
	_, statErr := os.Stat("/run/reboot-required")
	if res.RebootRequired != (statErr == nil) {
		t.Errorf("rebootRequired %v, /run/reboot-required: %v", res.RebootRequired, statErr)
	}
	// A host whose login fails answers with the transport's error, typed.
	bad := w.tg
	bad.Port = 1
	if _, err := w.acts.BootInfo(context.Background(), host.BootInfoInput{Target: bad}); !errtype.Is(err, errtype.HostUnreachable) {
		t.Errorf("unreachable host: %v", err)
	}
}
