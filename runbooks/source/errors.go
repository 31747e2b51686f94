package source

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Pos is a position in a source file. Line and Col are 1-based; zero means
// unknown.
type Pos struct {
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
	Col  int    `json:"col,omitempty"`
}

// At returns the position of a YAML node in file.
func At(file string, n *yaml.Node) Pos {
	if n == nil {
		return Pos{File: file}
	}
	return Pos{File: file, Line: n.Line, Col: n.Column}
}

// Shift returns p moved by col columns on the same line.
func (p Pos) Shift(col int) Pos {
	if p.Line > 0 {
		p.Col += col
	}
	return p
}

func (p Pos) String() string {
	file := p.File
	if file == "" {
		file = "<input>"
	}
	return fmt.Sprintf("%s:%d:%d", file, p.Line, p.Col)
}

// Error is one problem found in a source file.
type Error struct {
	Pos Pos    `json:"pos"`
	Msg string `json:"message"`
}

// Error is "FILE:LINE:COL: message" on one line: a newline a value
// brought into the message (a step id, say) is shown as \n, so every
// problem stays one positioned line.
func (e Error) Error() string {
	return e.Pos.String() + ": " + strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(e.Msg)
}

// Errors collects problems; it is an error when non-empty.
type Errors []Error

// Addf records a problem at pos.
func (l *Errors) Addf(pos Pos, format string, args ...any) {
	*l = append(*l, Error{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

// Add records the errors of err: an Errors list is merged, anything else is
// recorded at pos.
func (l *Errors) Add(pos Pos, err error) {
	if err == nil {
		return
	}
	if more, ok := err.(Errors); ok {
		*l = append(*l, more...)
		return
	}
	if one, ok := err.(Error); ok {
		*l = append(*l, one)
		return
	}
	*l = append(*l, Error{Pos: pos, Msg: err.Error()})
}

// Err returns the list sorted by position, or nil when it is empty.
func (l Errors) Err() error {
	if len(l) == 0 {
		return nil
	}
	out := slices.Clone(l)
	slices.SortStableFunc(out, func(a, b Error) int {
		return cmp.Or(cmp.Compare(a.Pos.File, b.Pos.File), cmp.Compare(a.Pos.Line, b.Pos.Line), cmp.Compare(a.Pos.Col, b.Pos.Col))
	})
	return slices.Compact(out)
}

// Error prints one FILE:LINE:COL: message line per problem.
func (l Errors) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}
