package gobin

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A second build of an unchanged program leaves the first's file in
// place (go build found it up to date and only touched it; a link writes
// a new file), and the program runs.
func TestSecondBuildReusesTheFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	const pkg = "kedge.dev/kedge/integration/gobin/testdata/hello"
	first, err := Build(pkg)
	if err != nil {
		t.Fatal(err)
	}
	st1, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Build(pkg)
	if err != nil {
		t.Fatal(err)
	}
	st2, err := os.Stat(second)
	if err != nil {
		t.Fatal(err)
	}
	if second != first || !os.SameFile(st1, st2) {
		t.Errorf("the second build %s linked a new file in the place of the first's %s", second, first)
	}
	out, err := exec.Command(second).Output()
	if err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Errorf("run %s: %q %v", second, out, err)
	}
}

// Trees and environments do not share a directory.
func TestDirIsPerTreeAndEnvironment(t *testing.T) {
	a, _ := Dir("/src/a", nil)
	b, _ := Dir("/src/b", nil)
	c, _ := Dir("/src/a", []string{"CGO_ENABLED=0"})
	if a == b || a == c || b == c {
		t.Errorf("directories shared: %s %s %s", a, b, c)
	}
}
