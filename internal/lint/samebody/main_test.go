package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScanFindsABodyWrittenTwice(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const twice = `
	if v == "" { // a comment does not count
		return def
	}
	return v
`
	write("a/a.go", "package a\n\nfunc or(v, def string) string {"+twice+"}\n")
	write("b/b.go", "package b\n\n// orDefault is laid out another way.\nfunc orDefault(v, def string) string {\n\tif v == \"\" {\n\t\treturn def\n\t}\n\n\treturn v\n}\n")
	write("b/short.go", "package b\n\nfunc one() int { return 1 }\nfunc uno() int { return 1 }\n")
	write("b/b_test.go", "package b\n\nfunc orTest(v, def string) string {"+twice+"}\n")
	write("integration/i.go", "package integration\n\nfunc or(v, def string) string {"+twice+"}\n")
	groups, err := scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || len(groups[0]) != 2 || !strings.HasSuffix(groups[0][0], "a.go:3 or") || !strings.HasSuffix(groups[0][1], "b.go:4 orDefault") {
		t.Fatalf("groups %q, want the one pair or/orDefault (one-statement bodies, tests and integration/ not counted)", groups)
	}
}
