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
	for _, tc := range []struct {
		name, out string
		want      host.BootInfoResult
		bad       bool
	}{
		{name: "debian waiting for a reboot", out: id + "--- os-release\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\n--- reboot\nrequired\n",
			want: host.BootInfoResult{BootID: strings.TrimSpace(id), OS: "debian", Version: "12", RebootRequired: true}},
		{name: "flatcar", out: id + "--- os-release\nNAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nID_LIKE=coreos\nVERSION_ID=4152.2.3\n--- reboot\n",
			want: host.BootInfoResult{BootID: strings.TrimSpace(id), OS: "flatcar", Version: "4152.2.3"}},
		{name: "single quotes and comments", out: id + "--- os-release\n# ID=nope\nID='fedora'\nVERSION_ID='42'\n--- reboot\n",
			want: host.BootInfoResult{BootID: strings.TrimSpace(id), OS: "fedora", Version: "42"}},
		{name: "no sections", out: id, bad: true},
		{name: "no boot ID", out: "--- os-release\nID=debian\n--- reboot\n", bad: true},
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
	if res.BootID != strings.TrimSpace(string(id)) || res.OS == "" {
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
