// Command samebody finds functions written twice: two functions (or
// methods) in the product code whose bodies are the same, token for token,
// once comments and layout are set aside. Tests, test worlds (integration/)
// and one-statement bodies (getters, an Error method) are not counted. It prints one
// line per group and exits 1 when there is any (run by `make lint`).
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/printer"
	"go/token"
	"os"
	"slices"
	"strings"

	"kedge.dev/kedge/internal/lint/gofiles"
)

// minStatements is the smallest body that counts: one-statement
// bodies (getters, an Error method returning a field) are not logic
// written twice.
const minStatements = 2

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	groups, err := scan(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "samebody:", err)
		os.Exit(2)
	}
	for _, g := range groups {
		fmt.Printf("samebody: the same body in %s\n", strings.Join(g, ", "))
	}
	if len(groups) > 0 {
		os.Exit(1)
	}
}

// scan returns the groups of functions under root that share a body,
// each group sorted, the groups sorted by their first member.
func scan(root string) ([][]string, error) {
	bodies := map[string][]string{}
	err := gofiles.Walk(root, func(fset *token.FileSet, f *ast.File) error {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || len(fn.Body.List) < minStatements {
				continue
			}
			var b bytes.Buffer
			if err := printer.Fprint(&b, token.NewFileSet(), fn.Body); err != nil {
				return err
			}
			pos := fset.Position(fn.Pos())
			bodies[b.String()] = append(bodies[b.String()], fmt.Sprintf("%s:%d %s", pos.Filename, pos.Line, fn.Name.Name))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var groups [][]string
	for _, g := range bodies {
		if len(g) > 1 {
			slices.Sort(g)
			groups = append(groups, g)
		}
	}
	slices.SortFunc(groups, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return groups, nil
}
