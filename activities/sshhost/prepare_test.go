package sshhost

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
)

// fakeNodeTools puts systemctl, modprobe and sysctl stand-ins first on
// PATH: each logs its call; systemctl keeps units' enabled and active
// state in files (a unit named fail-* does not start); modprobe knows
// the modules in known.
func fakeNodeTools(t *testing.T, known ...string) (state string) {
	bin, state := t.TempDir(), t.TempDir()
	scripts := map[string]string{
		"systemctl": `#!/bin/sh
s=` + state + `
echo "systemctl $*" >> $s/calls
case "$1" in
daemon-reload) ;;
enable) touch $s/$2.enabled ;;
disable) rm -f $s/$2.enabled ;;
start|restart) case "$2" in fail-*) echo "Job for $2 failed." >&2; exit 1 ;; esac; touch $s/$2.active ;;
stop) rm -f $s/$2.active ;;
is-enabled) if [ -f $s/$2.enabled ]; then echo enabled; else echo disabled; exit 1; fi ;;
is-active) if [ -f $s/$2.active ]; then echo active; else echo inactive; exit 3; fi ;;
*) exit 2 ;;
esac
`,
		"modprobe": `#!/bin/sh
echo "modprobe $*" >> ` + state + `/calls
case " ` + strings.Join(known, " ") + ` " in *" $2 "*) exit 0 ;; esac
echo "modprobe: FATAL: Module $2 not found" >&2; exit 1
`,
		"sysctl": `#!/bin/sh
echo "sysctl $*" >> ` + state + `/calls
`,
	}
	for name, s := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return state
}

func calls(t *testing.T, state string) []string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(state, "calls"))
	os.Remove(filepath.Join(state, "calls"))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// host.prepare-node loads the modules and applies the sysctl files, then
// reloads systemd before it enables and starts anything; it reports what
// it enabled and started, which its undo takes back; a second run
// changes nothing but restarts what runs when asked to.
func TestPrepareNode(t *testing.T) {
	state := fakeNodeTools(t, "nf_conntrack", "br_netfilter")
	w := newWorld(t)
	in := host.PrepareNodeInput{Target: w.tg, Modules: []string{"nf_conntrack", "br_netfilter"},
		SysctlFiles: []string{"/etc/sysctl.d/max-user-watches.conf", "/etc/sysctl.d/reverse-path-filter.conf"},
		Enable:      []string{"wait-for-dns.service", "containerd.service"}, Start: []string{"containerd.service"}}
	res, err := w.acts.PrepareNode(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"modprobe -- nf_conntrack", "modprobe -- br_netfilter",
		"sysctl -q -p /etc/sysctl.d/max-user-watches.conf", "sysctl -q -p /etc/sysctl.d/reverse-path-filter.conf",
		"systemctl daemon-reload",
		"systemctl is-enabled wait-for-dns.service", "systemctl enable wait-for-dns.service",
		"systemctl is-enabled containerd.service", "systemctl enable containerd.service",
		"systemctl is-active containerd.service", "systemctl start containerd.service", "systemctl is-active containerd.service"}
	if got := calls(t, state); !slices.Equal(got, want) {
		t.Errorf("calls:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Equal(res.Enabled, []string{"containerd.service", "wait-for-dns.service"}) || !slices.Equal(res.Started, []string{"containerd.service"}) {
		t.Errorf("%+v", res)
	}

	in.Restart = true
	again, err := w.acts.PrepareNode(t.Context(), in)
	if err != nil || len(again.Enabled)+len(again.Started) != 0 {
		t.Fatalf("again: %+v %v", again, err)
	}
	if got := calls(t, state); !slices.Contains(got, "systemctl restart containerd.service") || slices.Contains(got, "systemctl enable containerd.service") {
		t.Errorf("again, calls:\n%s", strings.Join(got, "\n"))
	}

	if _, err := w.acts.PrepareNode(t.Context(), host.PrepareNodeInput{Target: w.tg, Stop: res.Started, Disable: res.Enabled}); err != nil {
		t.Fatal(err)
	}
	want = []string{"systemctl stop containerd.service", "systemctl disable containerd.service", "systemctl disable wait-for-dns.service", "systemctl daemon-reload"}
	if got := calls(t, state); !slices.Equal(got, want) {
		t.Errorf("undo, calls:\n%s", strings.Join(got, "\n"))
	}
	if left, _ := filepath.Glob(filepath.Join(state, "*.service.*")); len(left) > 0 {
		t.Errorf("after the undo: %q", left)
	}
}

// A step that fails names itself, and the units the run enabled or
// started are taken back before it returns; a module that does not load
// stops it before any unit changes.
func TestPrepareNodeFailureTakesBackItsUnits(t *testing.T) {
	state := fakeNodeTools(t, "br_netfilter")
	w := newWorld(t)
	_, err := w.acts.PrepareNode(t.Context(), host.PrepareNodeInput{Target: w.tg, Enable: []string{"wait-for-dns.service", "fail-x.service"},
		Start: []string{"fail-x.service"}})
	appErr(t, err, errtype.CommandFailed, false)
	if !strings.Contains(err.Error(), "systemctl start fail-x.service failed") {
		t.Errorf("message %q", err)
	}
	if got := calls(t, state); !slices.Contains(got, "systemctl disable wait-for-dns.service") || !slices.Contains(got, "systemctl stop fail-x.service") {
		t.Errorf("calls:\n%s", strings.Join(got, "\n"))
	}
	if left, _ := filepath.Glob(filepath.Join(state, "*.service.*")); len(left) > 0 {
		t.Errorf("left: %q", left)
	}

	_, err = w.acts.PrepareNode(t.Context(), host.PrepareNodeInput{Target: w.tg, Modules: []string{"nf_conntrack"}, Enable: []string{"containerd.service"}})
	appErr(t, err, errtype.CommandFailed, false)
	if !strings.Contains(err.Error(), "modprobe nf_conntrack failed") || !strings.Contains(err.Error(), "Module nf_conntrack not found") {
		t.Errorf("message %q", err)
	}
	if got := calls(t, state); slices.ContainsFunc(got, func(c string) bool { return strings.HasPrefix(c, "systemctl") }) {
		t.Errorf("calls after a failed modprobe:\n%s", strings.Join(got, "\n"))
	}

	for _, in := range []host.PrepareNodeInput{
		{Target: w.tg, Modules: []string{"br_netfilter; reboot"}},
		{Target: w.tg, Modules: []string{"-v"}},
		{Target: w.tg, SysctlFiles: []string{"/etc/sysctl.conf"}},
		{Target: w.tg, SysctlFiles: []string{"/etc/sysctl.d/../shadow.conf"}},
		{Target: w.tg, Enable: []string{"--now"}},
		{Target: w.tg, Start: []string{"x.service"}, Stop: []string{"x.service"}},
		{Target: w.tg, Timeout: "soon"},
	} {
		_, err := w.acts.PrepareNode(t.Context(), in)
		appErr(t, err, errtype.InvalidInput, true)
	}
}
