package errtext

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// lint runs scripts/errtext.sh on a file holding body (the inside of a
// function) and returns what it refused ("" when it passed).
func lint(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.go")
	src := "package x\n\nfunc f(err error) bool {\n" + body + "\n}\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "../../../scripts/errtext.sh", p).CombinedOutput()
	if _, failed := err.(*exec.ExitError); err != nil && !failed {
		t.Fatal(err)
	}
	if (err != nil) != strings.Contains(string(out), "errors matched by their text") {
		t.Fatalf("exit %v with %s", err, out)
	}
	return string(out)
}

func TestErrtextRefusesTextMatches(t *testing.T) {
	for name, body := range map[string]string{
		"direct":                      `	return strings.Contains(err.Error(), "refused")`,
		"compared":                    `	return err.Error() == "EOF"`,
		"through a variable":          "\tmsg := err.Error()\n\treturn strings.Contains(msg, \"refused\")",
		"compared through a variable": "\tmsg := err.Error()\n\treturn msg == \"EOF\"",
		"literal first":               "\tmsg := err.Error()\n\treturn \"EOF\" == msg",
		"in an if":                    "\tif msg := err.Error(); strings.HasPrefix(msg, \"ssh:\") {\n\t\treturn true\n\t}\n\treturn false",
		"through two variables":       "\tmsg := err.Error()\n\tlower := strings.ToLower(msg)\n\treturn strings.Contains(lower, \"refused\")",
		"through a cut":               "\tmsg := err.Error()\n\tfirst, _, _ := strings.Cut(msg, \"\\n\")\n\treturn strings.HasSuffix(first, \"refused\")",
		"a marker far above":          "\t// third-party message: x\n\tn := 1\n\t_ = n\n\tmsg := err.Error()\n\treturn strings.Contains(msg, \"refused\")",
	} {
		if out := lint(t, body); !strings.Contains(out, "x.go:") {
			t.Errorf("%s: passed, want refused:\n%s", name, body)
		}
	}
}

func TestErrtextPassesMarkedAndUntextualUses(t *testing.T) {
	for name, body := range map[string]string{
		"marked line":          "\treturn strings.Contains(err.Error(), \"refused\") // third-party message: lib",
		"marked above":         "\t// third-party message: lib gives no type.\n\treturn strings.Contains(err.Error(), \"refused\")",
		"marked assignment":    "\t// third-party message: lib gives no type.\n\tmsg := err.Error()\n\treturn strings.Contains(msg, \"a\") || strings.Contains(msg, \"b\")",
		"marked comment block": "\t// third-party message: lib gives no type,\n\t// and says so at length,\n\t// over three lines.\n\tmsg := err.Error()\n\treturn strings.Contains(msg, \"a\")",
		"derived from marked":  "\t// third-party message: lib.\n\tmsg := err.Error()\n\tlower := strings.ToLower(msg)\n\treturn strings.Contains(lower, \"a\")",
		"marked use":           "\tmsg := err.Error()\n\t// third-party message: lib.\n\treturn strings.Contains(msg, \"a\")",
		"empty or not":         "\tif msg := err.Error(); msg != \"\" {\n\t\treturn true\n\t}\n\treturn false",
		"only shown":           "\tlast := err.Error()\n\tprintln(\"failed: \" + last)\n\treturn strings.Contains(last+\"x\", \"y\") && false",
		"set again":            "\tmsg := err.Error()\n\tmsg = \"fixed\"\n\treturn strings.Contains(msg, \"x\")",
		"a field of that name": "\tmsg := err.Error()\n\t_ = msg\n\tvar s struct{ msg string }\n\treturn strings.Contains(s.msg, \"x\")",
		"a type":               "\tvar ne interface{ Timeout() bool }\n\treturn errors.As(err, &ne) && ne.Timeout()",
	} {
		if out := lint(t, body); out != "" {
			t.Errorf("%s: refused, want passed:\n%s\n%s", name, body, out)
		}
	}
}

// Each function starts afresh: a parameter named like another
// function's error text is not that text.
func TestErrtextForgetsAtTheNextFunction(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.go")
	src := "package x\n\nfunc f(err error) string {\n\tmsg := err.Error()\n\treturn msg\n}\n\nfunc g(msg string) bool {\n\treturn strings.Contains(msg, \"x\")\n}\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "../../../scripts/errtext.sh", p).CombinedOutput(); err != nil {
		t.Errorf("refused: %v\n%s", err, out)
	}
}
