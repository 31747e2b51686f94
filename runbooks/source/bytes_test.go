package source

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
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

// naiveExpansion walks n expanding every alias, as a loader copying the
// document out would, and stops once past either bound.
func naiveExpansion(n *yaml.Node) (nodes, text int) {
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if nodes > MaxNodes || text > MaxExpandedBytes {
			return
		}
		nodes++
		if n.Kind == yaml.ScalarNode {
			text += len(n.Value)
		}
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			walk(n.Alias)
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return nodes, text
}

// FuzzExpandedSize: a document Parse accepts expands, aliases and all,
// within MaxNodes and MaxExpandedBytes; one it refuses for its aliases
// really expands past one of them (measured by expanding it, bounded).
func FuzzExpandedSize(f *testing.F) {
	for _, seed := range []string{"a: 1\n", "a: &x [1, 2]\nb: *x\n", bomb(3), bomb(6), "a: &a \"" + strings.Repeat("y", 5000) + "\"\nb: [" + strings.Repeat("*a, ", 900) + "*a]\n",
		"a: &a\n  b: *a\n", "--- \n---\na: &s ssss\nb: [*s, *s]\n", "? &k [a, b]\n: *k\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !strings.Contains(err.Error(), "aliases expand the document") {
				return
			}
			// Every document parsed again, the one refused must be over.
			dec := yaml.NewDecoder(bytes.NewReader(data))
			for {
				var n yaml.Node
				if dec.Decode(&n) != nil {
					break
				}
				if nodes, size := naiveExpansion(&n); nodes > MaxNodes || size > MaxExpandedBytes {
					return
				}
			}
			t.Fatalf("refused a document within the bounds: %v", err)
		}
		for _, d := range docs {
			if nodes, size := naiveExpansion(d.Root); nodes > MaxNodes || size > MaxExpandedBytes {
				t.Fatalf("accepted a document that expands to %d nodes, %d bytes", nodes, size)
			}
		}
	})
}
