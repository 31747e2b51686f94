// Command funclen finds functions too long to read at once: product code
// (tests and the test world, integration/, aside) with a function of more
// than MaxLines lines. It prints one line per function and exits 1 when
// there is any (run by `make lint`).
package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"os"

	"kedge.dev/kedge/internal/lint/gofiles"
)

// MaxLines is the longest function allowed, from its func line to its
// closing brace.
const MaxLines = 150

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	long, err := scan(root, MaxLines)
	if err != nil {
		fmt.Fprintln(os.Stderr, "funclen:", err)
		os.Exit(2)
	}
	for _, l := range long {
		fmt.Printf("funclen: %s is over %d lines: split it\n", l, MaxLines)
	}
	if len(long) > 0 {
		os.Exit(1)
	}
}

// scan lists "file:line name (N lines)" for each function under root
// longer than max.
func scan(root string, max int) ([]string, error) {
	var long []string
	err := gofiles.Walk(root, func(fset *token.FileSet, f *ast.File) error {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			if n := end.Line - start.Line + 1; n > max {
				long = append(long, fmt.Sprintf("%s:%d %s (%d lines)", start.Filename, start.Line, fn.Name.Name, n))
			}
		}
		return nil
	})
	return long, err
}
