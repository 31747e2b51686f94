package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeKernel points the stand-in at a kernel of the test's making: with
// modules (a /lib/modules/RELEASE directory) or without (only
// /sys/module, /proc/modules and /proc/config.gz).
func fakeKernel(t *testing.T, withModules bool) string {
	t.Helper()
	dir := t.TempDir()
	modulesDir = filepath.Join(dir, "lib/modules")
	sysModule = filepath.Join(dir, "sys/module")
	procModules = filepath.Join(dir, "proc/modules")
	kernelConfig = filepath.Join(dir, "proc/config.gz")
	logFile = filepath.Join(dir, "var/log/kedge-lab/modprobe.log")
	release = func() string { return "6.1.0-test" }
	now = func() time.Time { return time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC) }
	write := func(p, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(procModules, "nf_conntrack 176128 1 - Live 0x0000000000000000\n")
	if withModules {
		kdir := filepath.Join(modulesDir, "6.1.0-test")
		write(filepath.Join(kdir, "modules.builtin"), "kernel/net/bridge/br_netfilter.ko\nkernel/net/bridge/bridge.ko\n")
		write(filepath.Join(kdir, "modules.dep"), "kernel/fs/overlay/overlay.ko.xz:\nkernel/drivers/net/vxlan/vxlan.ko.xz: kernel/net/ipv4/udp_tunnel.ko.xz\n")
		write(filepath.Join(kdir, "modules.alias"), "# Aliases extracted from modules themselves.\nalias fs-overlay overlay\n")
	} else {
		if err := os.MkdirAll(filepath.Join(sysModule, "nf_conntrack"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(sysModule, "vxlan"), 0o755); err != nil {
			t.Fatal(err)
		}
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write([]byte("# CONFIG_MODULES is not set\nCONFIG_BRIDGE_NETFILTER=y\nCONFIG_NF_CONNTRACK=y\nCONFIG_OVERLAY_FS=m\n"))
		w.Close()
		write(kernelConfig, z.String())
	}
	return dir
}

func modprobe(args ...string) (stdout, stderr string, rc int) {
	var o, e bytes.Buffer
	rc = run(args, &o, &e)
	return o.String(), e.String(), rc
}

func logged(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(logFile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// With the kernel's modules directory, modprobe finds modules where the
// real one does, and records each load, loading nothing.
func TestModprobeRecordsLoads(t *testing.T) {
	fakeKernel(t, true)
	for _, args := range [][]string{{"--", "br_netfilter"}, {"nf-conntrack"}, {"-q", "overlay"}, {"-a", "bridge", "fs-overlay"}} {
		if out, errOut, rc := modprobe(args...); rc != 0 || out != "" || errOut != "" {
			t.Errorf("modprobe %q: %d %q %q", args, rc, out, errOut)
		}
	}
	kdir := filepath.Join(modulesDir, "6.1.0-test")
	want := "2026-11-26T12:00:00Z br_netfilter builtin\n" +
		"2026-11-26T12:00:00Z nf_conntrack loaded\n" +
		"2026-11-26T12:00:00Z overlay insmod:" + kdir + "/kernel/fs/overlay/overlay.ko.xz\n" +
		"2026-11-26T12:00:00Z bridge builtin\n" +
		"2026-11-26T12:00:00Z overlay insmod:" + kdir + "/kernel/fs/overlay/overlay.ko.xz\n"
	if got := logged(t); got != want {
		t.Errorf("log:\n%s\nwant\n%s", got, want)
	}

	// A dry run checks and records nothing; -v shows an insertion.
	if out, _, rc := modprobe("-n", "-v", "vxlan"); rc != 0 || out != "insmod "+kdir+"/kernel/drivers/net/vxlan/vxlan.ko.xz\n" {
		t.Errorf("modprobe -n -v vxlan: %d %q", rc, out)
	}
	if out, _, rc := modprobe("-v", "br_netfilter", "--dry-run"); rc != 0 || out != "" {
		t.Errorf("modprobe -v of a built-in module: %d %q", rc, out)
	}
	if got := logged(t); got != want {
		t.Errorf("a dry run was recorded:\n%s", got)
	}
}

// What modprobe refuses, the stand-in refuses with its words and exit
// code; what it does not do, it refuses too.
func TestModprobeRefuses(t *testing.T) {
	fakeKernel(t, true)
	kdir := filepath.Join(modulesDir, "6.1.0-test")
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"no_such_module"}, "modprobe: FATAL: Module no_such_module not found in directory " + kdir + "\n"},
		{[]string{"-q", "no_such_module"}, ""},
		{[]string{"-a", "overlay", "nope"}, "modprobe: FATAL: Module nope not found in directory " + kdir + "\n"},
		{nil, "modprobe: ERROR: missing parameters. See -h.\n"},
		{[]string{"--frobnicate", "overlay"}, "modprobe: unrecognized option '--frobnicate'\n"},
		{[]string{"-z", "overlay"}, "modprobe: invalid option -- 'z'\n"},
		{[]string{"--first-time", "br_netfilter"}, "modprobe: ERROR: could not insert 'br_netfilter': Module already in kernel\n"},
		{[]string{"overlay", "redirect_dir=on"}, "modprobe: ERROR: redirect_dir=on: the test world's modprobe stand-in takes no module parameters\n"},
		{[]string{"-r", "overlay"}, "modprobe: ERROR: -r: the test world's modprobe stand-in does not do this (it only checks and records loads)\n"},
		{[]string{"--show-depends", "overlay"}, "modprobe: ERROR: --show-depends: the test world's modprobe stand-in does not do this (it only checks and records loads)\n"},
	} {
		out, errOut, rc := modprobe(c.args...)
		if rc != 1 || out != "" || errOut != c.stderr {
			t.Errorf("modprobe %q: %d %q %q, want 1 and %q", c.args, rc, out, errOut, c.stderr)
		}
	}
	if got := logged(t); got != "2026-11-26T12:00:00Z overlay insmod:"+kdir+"/kernel/fs/overlay/overlay.ko.xz\n" {
		t.Errorf("log: %q", got) // -a's overlay, before the name it did not find
	}
}

// Without a modules directory (a kernel built without modules), a module
// is one the kernel shows: loaded, in /sys/module, or built in by its
// option in the kernel's configuration.
func TestModprobeWithoutModulesDirectory(t *testing.T) {
	fakeKernel(t, false)
	for _, m := range []string{"br_netfilter", "nf_conntrack", "vxlan"} {
		if _, errOut, rc := modprobe(m); rc != 0 {
			t.Errorf("modprobe %s: %d %s", m, rc, errOut)
		}
	}
	// overlay is =m, not loaded; bridge's option is not set.
	for _, m := range []string{"overlay", "bridge", "no_such_module"} {
		if _, errOut, rc := modprobe(m); rc != 1 || !strings.Contains(errOut, "Module "+m+" not found in directory "+filepath.Join(modulesDir, "6.1.0-test")) {
			t.Errorf("modprobe %s: %d %s", m, rc, errOut)
		}
	}
	want := "2026-11-26T12:00:00Z br_netfilter builtin\n2026-11-26T12:00:00Z nf_conntrack loaded\n2026-11-26T12:00:00Z vxlan builtin\n"
	if got := logged(t); got != want {
		t.Errorf("log:\n%s\nwant\n%s", got, want)
	}
}
