package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScanFindsOnlyLongProductFunctions(t *testing.T) {
	dir := t.TempDir()
	body := func(name string, lines int) string {
		return "func " + name + "() {\n" + strings.Repeat("\t_ = 1\n", lines-2) + "}\n"
	}
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a/a.go", "package a\n\n"+body("fits", 10)+body("long", 11))
	write("a/a_test.go", "package a\n\n"+body("longTest", 20))
	write("integration/i.go", "package integration\n\n"+body("longWorld", 20))
	got, err := scan(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.HasSuffix(got[0], "a.go:13 long (11 lines)") {
		t.Fatalf("got %q, want only long (11 lines)", got)
	}
}
