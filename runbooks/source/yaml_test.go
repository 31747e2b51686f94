package source

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bomb is a document of n levels of nine aliases each: a few hundred
// bytes that expand to 9^n nodes.
func bomb(levels int) string {
	var b strings.Builder
	b.WriteString("l0: &l0 [x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < levels; i++ {
		p := fmt.Sprintf("*l%d", i-1)
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.Repeat(p+", ", 8)+p)
	}
	return b.String()
}

// An alias bomb is refused before anything expands it, at the alias that
// takes the document past MaxNodes (the first of line 6: five levels make
// 75,000 nodes, the sixth's first alias adds 66,000); aliases that stay
// small are fine.
func TestParseRefusesAnAliasBomb(t *testing.T) {
	doc := bomb(9)
	if len(doc) > 700 {
		t.Fatalf("the bomb is %d bytes", len(doc))
	}
	_, err := Parse("bomb.yaml", []byte(doc))
	if err == nil || !strings.Contains(err.Error(), "bomb.yaml:6:10:") || !strings.Contains(err.Error(), "aliases expand the document to more than 100000 nodes") {
		t.Fatalf("alias bomb: %v", err)
	}
	docs, err := Parse("small.yaml", []byte(bomb(4)))
	if err != nil {
		t.Fatalf("9^4 nodes: %v", err)
	}
	var errs Errors
	v := Value("small.yaml", docs[0].Root, &errs).(map[string]any)
	if l3 := v["l3"].([]any); len(l3) != 9 || len(errs) != 0 {
		t.Errorf("l3 has %d items (%v)", len(l3), errs)
	}
}

// A file over MaxFileBytes is refused without being read whole.
func TestReadFileRefusesALargeFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(p, []byte("a: "+strings.Repeat("x", MaxFileBytes)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p); err == nil || !strings.Contains(err.Error(), "big.yaml:1:1: file is over 1048576 bytes") {
		t.Errorf("large file: %v", err)
	}
}

// FuzzParse: any bytes parse or fail with a positioned error, and what
// parses stays within MaxNodes however its aliases expand.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"a: 1\n", "a: &x [1, 2]\nb: *x\n", bomb(3), bomb(9), "a: [\n", "--- \n---\na: b\n", "a: &a\n  b: *a\n", "? [a, b]\n: c\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml:") {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		for _, d := range docs {
			var errs Errors
			_ = Value("fuzz.yaml", d.Root, &errs)
		}
	})
}
