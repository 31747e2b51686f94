package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeProc makes a /proc/sys of the test's making and points the
// stand-in at it, its state file and system directories in the same
// place; it runs as root.
func fakeProc(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	procSys = filepath.Join(dir, "proc/sys") + "/"
	stateFile = filepath.Join(dir, "var/lib/kedge-lab/sysctl.conf")
	defaultPreload = filepath.Join(dir, "etc/sysctl.conf")
	systemDirs = []string{filepath.Join(dir, "etc/sysctl.d"), filepath.Join(dir, "usr/lib/sysctl.d")}
	geteuid = func() int { return 0 }
	for p, v := range map[string]string{
		"net/ipv4/conf/all/rp_filter":     "2\n",
		"net/ipv4/conf/default/rp_filter": "2\n",
		"net/ipv4/conf/lo/rp_filter":      "2\n",
		"net/ipv4/conf/eth0.1/rp_filter":  "2\n",
		"net/ipv4/ip_local_port_range":    "32768\t60999\n",
		"fs/inotify/max_user_watches":     "192536\n",
		"kernel/core_pattern":             "core\n",
		"kernel/osrelease":                "6.1.0-test\n",
		"vm/drop_caches":                  "0\n",
	} {
		write(t, procSys+p, v)
	}
	if err := os.Chmod(procSys+"kernel/osrelease", 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(procSys+"vm/drop_caches", 0o200); err != nil {
		t.Fatal(err)
	}
	return dir
}

func write(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sysctl(args ...string) (stdout, stderr string, rc int) {
	var o, e bytes.Buffer
	rc = run(args, strings.NewReader(""), &o, &e) & 0xff // as main exits
	return o.String(), e.String(), rc
}

// real is what the fake /proc/sys holds: the stand-in never changes it.
func realValue(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile(procSys + key)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func recordedFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(stateFile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.TrimPrefix(string(b), stateHeader)
}

// Typhoon's Fedora CoreOS sysctl files, applied with -q -p as node-join
// applies them: every key recorded on the host (the glob on each
// interface), read back as set; /proc/sys unchanged.
func TestSysctlLoadRecordsAndReads(t *testing.T) {
	dir := fakeProc(t)
	write(t, dir+"/etc/sysctl.d/reverse-path-filter.conf", "net.ipv4.conf.default.rp_filter=0\nnet.ipv4.conf.*.rp_filter=0\n")
	write(t, dir+"/etc/sysctl.d/max-user-watches.conf", "fs.inotify.max_user_watches=16184\n")
	for _, f := range []string{"reverse-path-filter.conf", "max-user-watches.conf"} {
		if out, errOut, rc := sysctl("-q", "-p", dir+"/etc/sysctl.d/"+f); rc != 0 || out != "" || errOut != "" {
			t.Fatalf("sysctl -q -p %s: %d %q %q", f, rc, out, errOut)
		}
	}
	want := "net.ipv4.conf.default.rp_filter = 0\n" +
		"net.ipv4.conf.all.rp_filter = 0\n" +
		"net.ipv4.conf.eth0/1.rp_filter = 0\n" +
		"net.ipv4.conf.lo.rp_filter = 0\n" +
		"fs.inotify.max_user_watches = 16184\n"
	if got := recordedFile(t); got != want {
		t.Errorf("state:\n%s\nwant\n%s", got, want)
	}
	if realValue(t, "net/ipv4/conf/all/rp_filter") != "2\n" || realValue(t, "fs/inotify/max_user_watches") != "192536\n" {
		t.Error("the stand-in wrote /proc/sys")
	}
	out, errOut, rc := sysctl("-n", "net.ipv4.conf.default.rp_filter", "net/ipv4/conf/all/rp_filter", "fs.inotify.max_user_watches", "kernel.core_pattern")
	if rc != 0 || out != "0\n0\n16184\ncore\n" || errOut != "" {
		t.Errorf("sysctl -n: %d %q %q", rc, out, errOut)
	}
	if out, _, _ := sysctl("net.ipv4.conf.eth0/1.rp_filter", "net/ipv4/conf/eth0.1/rp_filter"); out != "net.ipv4.conf.eth0/1.rp_filter = 0\nnet.ipv4.conf.eth0/1.rp_filter = 0\n" {
		t.Errorf("a key with a dot in it: %q", out)
	}
	if out, _, _ := sysctl("-N", "fs.inotify"); out != "fs.inotify.max_user_watches\n" {
		t.Errorf("sysctl -N fs.inotify: %q", out)
	}
	if out, _, _ := sysctl("net.ipv4.conf.lo"); out != "net.ipv4.conf.lo.rp_filter = 0\n" {
		t.Errorf("a directory: %q", out)
	}

	// Writes print what they set; the later setting wins.
	out, errOut, rc = sysctl("-w", "net.ipv4.ip_local_port_range=1024  65000", "kernel.core_pattern=|/bin/false %p")
	if rc != 0 || errOut != "" || out != "net.ipv4.ip_local_port_range = 1024  65000\nkernel.core_pattern = |/bin/false %p\n" {
		t.Errorf("sysctl -w: %d %q %q", rc, out, errOut)
	}
	if out, _, _ := sysctl("net.ipv4.ip_local_port_range", "kernel.core_pattern"); out != "net.ipv4.ip_local_port_range = 1024\t65000\nkernel.core_pattern = |/bin/false %p\n" {
		t.Errorf("read back: %q", out)
	}
	if _, _, rc := sysctl("fs.inotify.max_user_watches=8192"); rc != 0 {
		t.Fatal(rc)
	}
	if out, _, _ := sysctl("-b", "fs.inotify.max_user_watches"); out != "8192" {
		t.Errorf("sysctl -b: %q", out)
	}
}

// Globs as procps has them: a key another line names is that line's, an
// excluded one nobody's; a glob matching nothing sets nothing.
func TestSysctlGlobs(t *testing.T) {
	dir := fakeProc(t)
	write(t, dir+"/a.conf", "# Typhoon's and more\n; comment\n\nnet.ipv4.conf.*.rp_filter = 0\n-net.ipv4.conf.eth0/1.rp_filter\nnet.ipv4.conf.lo.rp_filter = 1\nnet.ipv6.conf.*.forwarding = 1\n")
	out, errOut, rc := sysctl("-p", dir+"/a.conf")
	if rc != 0 || errOut != "" || out != "net.ipv4.conf.all.rp_filter = 0\nnet.ipv4.conf.default.rp_filter = 0\nnet.ipv4.conf.lo.rp_filter = 1\n" {
		t.Errorf("sysctl -p: %d %q %q", rc, out, errOut)
	}
	if got := recordedFile(t); got != "net.ipv4.conf.all.rp_filter = 0\nnet.ipv4.conf.default.rp_filter = 0\nnet.ipv4.conf.lo.rp_filter = 1\n" {
		t.Errorf("state:\n%s", got)
	}
}

// What procps refuses, the stand-in refuses with its words and exit
// codes, recording nothing of what failed.
func TestSysctlRefuses(t *testing.T) {
	dir := fakeProc(t)
	write(t, dir+"/bad.conf", "net.ipv4.conf.all.rp_filter = 1\nno.such.key = 1\n-no.such.other = 2\njunk\nkernel.osrelease = 7\n")
	for _, c := range []struct {
		args           []string
		rc             int
		stdout, stderr string
	}{
		{[]string{"-n", "no.such.key"}, 1, "", "sysctl: cannot stat " + procSys + "no/such/key: No such file or directory\n"},
		{[]string{"no.such.key", "no.such.other"}, 2, "", "sysctl: cannot stat " + procSys + "no/such/key: No such file or directory\nsysctl: cannot stat " + procSys + "no/such/other: No such file or directory\n"},
		{[]string{"-e", "no.such.key"}, 0, "", ""},
		{[]string{""}, 255, "", "sysctl: \"\" is an unknown key\n"},
		{[]string{"-w", "no.such.key=1"}, 1, "", "sysctl: cannot stat " + procSys + "no/such/key: No such file or directory\n"},
		{[]string{"-w", "net.ipv4.conf.*.rp_filter=1"}, 1, "", "sysctl: cannot stat " + procSys + "net/ipv4/conf/*/rp_filter: No such file or directory\n"},
		{[]string{"-w", "kernel.core_pattern"}, 1, "", "sysctl: command line(0): invalid syntax, continuing...\n"},
		{[]string{"-w", "fs.inotify.max_user_watches=lots"}, 1, "", "sysctl: setting key \"fs.inotify.max_user_watches\": Invalid argument\n"},
		{[]string{"net.ipv4.ip_local_port_range=1 2 3"}, 1, "", "sysctl: setting key \"net.ipv4.ip_local_port_range\": Invalid argument\n"},
		{[]string{"kernel.osrelease=7"}, 0, "", "sysctl: setting key \"kernel.osrelease\": Operation not permitted\n"},
		{[]string{"kernel=7"}, 0, "", "sysctl: setting key \"kernel\": Is a directory\n"}, // /proc/sys's are 0555: "Operation not permitted"
		{[]string{"-q", "-p", dir + "/no.conf"}, 1, "", "sysctl: cannot open \"" + dir + "/no.conf\": No such file or directory\n"},
		{[]string{"-n"}, 1, "", "sysctl: no variables specified\nTry `sysctl --help' for more information.\n"},
		{[]string{"-N", "-q", "kernel.core_pattern"}, 1, "", "sysctl: options -N and -q cannot coexist\nTry `sysctl --help' for more information.\n"},
		{[]string{"--frobnicate", "-w", "kernel.core_pattern=x"}, 0, "usage", "sysctl: unrecognized option '--frobnicate'\n"},
		{[]string{"-Z", "kernel.core_pattern=x"}, 0, "usage", "sysctl: invalid option -- 'Z'\n"},
		{[]string{"-q", "-p", dir + "/bad.conf"}, 1, "", "sysctl: " + dir + "/bad.conf(4): invalid syntax, continuing...\n" +
			"sysctl: cannot stat " + procSys + "no/such/key: No such file or directory\n" +
			"sysctl: cannot stat " + procSys + "no/such/other: No such file or directory\n" +
			"sysctl: setting key \"kernel.osrelease\": Operation not permitted\n"},
	} {
		out, errOut, rc := sysctl(c.args...)
		if c.stdout == "usage" && strings.Contains(out, "Usage:\n sysctl [options] [variable[=value] ...]") {
			out = "usage"
		}
		if rc != c.rc || out != c.stdout || errOut != c.stderr {
			t.Errorf("sysctl %q: %d %q %q, want %d %q %q", c.args, rc, out, errOut, c.rc, c.stdout, c.stderr)
		}
	}
	// Only the good line of bad.conf was recorded.
	if got := recordedFile(t); got != "net.ipv4.conf.all.rp_filter = 1\n" {
		t.Errorf("state:\n%s", got)
	}
}

// --system reads the system directories in name order, the first of a
// name winning, then /etc/sysctl.conf, ignoring unknown keys; --dry-run
// records nothing; not root, nothing is set.
func TestSysctlSystemDryRunAndNotRoot(t *testing.T) {
	dir := fakeProc(t)
	write(t, dir+"/etc/sysctl.d/50-b.conf", "fs.inotify.max_user_watches = 16184\nno.such.key = 1\n")
	write(t, dir+"/usr/lib/sysctl.d/50-b.conf", "kernel.core_pattern = vendor\n")
	write(t, dir+"/usr/lib/sysctl.d/10-a.conf", "kernel.core_pattern = first\n")
	write(t, dir+"/usr/lib/sysctl.d/README", "kernel.core_pattern = not a conf file\n")
	write(t, dir+"/etc/sysctl.conf", "net.ipv4.conf.lo.rp_filter = 1\n")

	out, errOut, rc := sysctl("--dry-run", "--system")
	wantOut := "* Applying " + dir + "/usr/lib/sysctl.d/10-a.conf ...\n* Applying " + dir + "/etc/sysctl.d/50-b.conf ...\n* Applying " + dir + "/etc/sysctl.conf ...\n" +
		"kernel.core_pattern = first\nfs.inotify.max_user_watches = 16184\nnet.ipv4.conf.lo.rp_filter = 1\n"
	if rc != 0 || errOut != "" || out != wantOut {
		t.Errorf("sysctl --dry-run --system: %d %q %q", rc, out, errOut)
	}
	if got := recordedFile(t); got != "" {
		t.Errorf("a dry run recorded:\n%s", got)
	}

	geteuid = func() int { return 1500 }
	if out, errOut, rc := sysctl("-q", "--system"); rc != 1 || out != "" || !strings.Contains(errOut, "sysctl: permission denied on key \"kernel.core_pattern\"\n") {
		t.Errorf("not root: %d %q %q", rc, out, errOut)
	}
	if out, errOut, rc := sysctl("-p", dir+"/etc/sysctl.conf"); rc != 1 || out != "" || errOut != "sysctl: permission denied on key \"net.ipv4.conf.lo.rp_filter\"\n" {
		t.Errorf("not root: %d %q %q", rc, out, errOut)
	}
	geteuid = func() int { return 0 }
	if _, _, rc := sysctl("-q", "--system"); rc != 0 {
		t.Errorf("sysctl -q --system: %d", rc)
	}
	if got := recordedFile(t); got != "kernel.core_pattern = first\nfs.inotify.max_user_watches = 16184\nnet.ipv4.conf.lo.rp_filter = 1\n" {
		t.Errorf("state:\n%s", got)
	}
}
