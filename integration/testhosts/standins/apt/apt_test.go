package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kedge.dev/kedge/integration/testhosts/standins/osstate"
)

func TestParseTakesOptionsAsAptDoes(t *testing.T) {
	c, msg := parse([]string{"-qq", "upgrade", "-o", "APT::Get::Assume-Yes=true", "-oquiet=1", "--with-new-pkgs"}, map[string]bool{"y": true, "s": true})
	if msg != "" || !c.yes || !c.withNew || c.quiet != 1 || len(c.operands) != 1 {
		t.Errorf("%+v %q", c, msg)
	}
	for args, want := range map[string]string{
		"-yz upgrade":    "Command line option 'z' [from -yz] is not understood in combination with the other options.",
		"--frob upgrade": "Command line option --frob is not understood in combination with the other options",
		"-o Foo upgrade": "Option -o: Configuration item specification must have an =<val>.",
	} {
		if _, msg := parse(strings.Fields(args), map[string]bool{"y": true, "s": true}); msg != want {
			t.Errorf("%s: %q, want %q", args, msg, want)
		}
	}
}

func TestUpgradeKeepsBackHeldAndNewAsAptGet(t *testing.T) {
	installed := []osstate.Package{{Name: "curl", Version: "1"}, {Name: "linux-image-amd64", Version: "1", Depends: []string{"linux-image-1-amd64"}},
		{Name: "linux-image-1-amd64", Version: "1"}, {Name: "openssl", Version: "1", Held: true}}
	lists := []osstate.Package{{Name: "curl", Version: "2"}, {Name: "openssl", Version: "2"},
		{Name: "linux-image-amd64", Version: "2", Depends: []string{"linux-image-2-amd64"}}, {Name: "linux-image-2-amd64", Version: "2"}}
	pl := planUpgrade(installed, lists, false)
	if got := strings.Join(names(pl.upgrade), " ") + "|" + strings.Join(pl.kept, " ") + "|" + strings.Join(names(pl.install), " "); got != "curl|linux-image-amd64 openssl|" {
		t.Errorf("upgrade: %s", got)
	}
	pl = planUpgrade(installed, lists, true)
	if got := strings.Join(names(pl.upgrade), " ") + "|" + strings.Join(pl.kept, " ") + "|" + strings.Join(names(pl.install), " "); got != "curl linux-image-amd64|openssl|linux-image-2-amd64" {
		t.Errorf("dist-upgrade: %s", got)
	}
}

func TestUpgradeAsksAndAbortsWithoutAnAnswer(t *testing.T) {
	root := t.TempDir()
	state := filepath.Join(root, osstate.StateDir)
	if err := osstate.WriteFile(filepath.Join(state, osstate.DpkgStatusName), osstate.FormatDpkgStatus([]osstate.Package{{Name: "curl", Version: "1"}})); err != nil {
		t.Fatal(err)
	}
	if err := osstate.WriteJSON(filepath.Join(state, osstate.AptListsName), []osstate.Package{{Name: "curl", Version: "2"}}); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	a := &app{stdin: bufio.NewReader(strings.NewReader("")), stdout: &out, stderr: &errOut, root: root}
	if rc := a.get([]string{"upgrade"}); rc != 1 || !strings.HasSuffix(out.String(), "Do you want to continue? [Y/n] Abort.\n") {
		t.Errorf("exit %d:\n%s", rc, out.String())
	}
	out.Reset()
	a.stdin = bufio.NewReader(strings.NewReader("\n"))
	if rc := a.get([]string{"upgrade"}); rc != 0 || !strings.Contains(out.String(), "Setting up curl (2) ...") {
		t.Errorf("answered: exit %d:\n%s", rc, out.String())
	}
	if _, err := os.Stat(filepath.Join(root, "/run/reboot-required")); err == nil {
		t.Error("reboot-required without a kernel")
	}
}
