package source

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// aliasFlood is a runbook-shaped document just under MaxFileBytes: one
// scalar of 820 KB and 45,000 aliases to it. Its nodes stay under
// MaxNodes, but expanded it is 37 GB of text: `kedge plan` ran out of
// memory at 3.3 GB on it.
func aliasFlood() []byte {
	var b strings.Builder
	b.WriteString("apiVersion: kedge/v1\nkind: Runbook\nmetadata: {name: flood}\nparams:\n  big: {type: string, default: &a \"")
	b.WriteString(strings.Repeat("x", 820_000))
	b.WriteString("\"}\nsteps:\n  - id: one\n    action: host.run\n    on: worker-1\n    with:\n      command: \"true\"\n      env: {A: [")
	b.WriteString(strings.Repeat("*a, ", 44_999))
	b.WriteString("*a]}\n")
	return []byte(b.String())
}

// The attacker's file is refused by Parse, at an alias, before anything
// expands it, and the check allocates little.
func TestParseRefusesAliasesExpandingPastTheByteBound(t *testing.T) {
	doc := aliasFlood()
	if len(doc) > MaxFileBytes {
		t.Fatalf("the flood is %d bytes, over the file bound", len(doc))
	}
	var err error
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Parse("flood.yaml", doc)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "flood.yaml:12:") || !strings.Contains(err.Error(), "aliases expand the document to more than 4194304 bytes") {
		t.Fatalf("alias flood: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 256<<20 {
		t.Errorf("parsing the flood allocated %d MB", n>>20)
	}
	// The same through a file, as runbooks, inventories and ChatOps
	// configs are read.
	p := filepath.Join(t.TempDir(), "flood.yaml")
	if err := os.WriteFile(p, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("ReadFile: %v", err)
	}
	// Aliases that stay within the bound are fine.
	if _, err := Parse("small.yaml", []byte("a: &a \""+strings.Repeat("y", 1000)+"\"\nb: [*a, *a, *a]\n")); err != nil {
		t.Errorf("small aliases: %v", err)
	}
}
