package tftemplate

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"unicode/utf8"
)

// Kinds of error; an *Error unwraps to one of them.
var (
	// ErrSyntax: the template or an expression in it is not valid (or uses
	// a construct this package does not support).
	ErrSyntax = errors.New("invalid template")
	// ErrUndeclared: the template refers to a variable that vars lacks.
	ErrUndeclared = errors.New("undeclared variable")
	// ErrUnknownFunction: the template calls a function Terraform (or this
	// package) does not have.
	ErrUnknownFunction = errors.New("unknown function")
	// ErrType: a value of the wrong type (a list interpolated into the text,
	// a condition that is not a bool, ...).
	ErrType = errors.New("invalid value")
	// ErrCall: a function refused its arguments.
	ErrCall = errors.New("function call failed")
	// ErrVars: the vars map itself is not valid (a name that is not an
	// identifier, a value of a type templates have no counterpart for).
	ErrVars = errors.New("invalid template variables")
)

// Error is an error at a place in a template file.
type Error struct {
	File   string
	Line   int // 1-based
	Column int // 1-based, in characters
	Kind   error
	Msg    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d:%d: %v: %s", e.File, e.Line, e.Column, e.Kind, e.Msg)
}

// Unwrap returns the kind of error (ErrSyntax, ErrUndeclared, ...).
func (e *Error) Unwrap() error { return e.Kind }

// Template is a parsed template file.
type Template struct {
	name string
	src  string
	body []node
}

// Name returns the file name the template was parsed under.
func (t *Template) Name() string { return t.name }

// Parse parses src, the contents of the template file name (the name is
// used in errors).
func Parse(name string, src []byte) (*Template, error) {
	s := string(src)
	if !utf8.ValidString(s) {
		return nil, &Error{File: name, Line: 1, Column: 1, Kind: ErrSyntax, Msg: "the file is not valid UTF-8"}
	}
	p := &parser{name: name, src: s}
	parts, err := p.parts()
	if err != nil {
		return nil, err
	}
	body, err := p.tree(parts)
	if err != nil {
		return nil, err
	}
	return &Template{name: name, src: s, body: body}, nil
}

// Execute renders the template with vars, like Terraform's
// templatefile(name, vars).
func (t *Template) Execute(vars map[string]any) (string, error) {
	values := make(map[string]any, len(vars))
	for k, v := range vars {
		if !validIdent(k) {
			return "", &Error{File: t.name, Line: 1, Column: 1, Kind: ErrVars,
				Msg: fmt.Sprintf("variable name %q must start with a letter or underscore, followed by letters, digits, underscores or dashes", k)}
		}
		nv, err := normalize(v)
		if err != nil {
			return "", &Error{File: t.name, Line: 1, Column: 1, Kind: ErrVars,
				Msg: fmt.Sprintf("variable %q: %v", k, err)}
		}
		values[k] = nv
	}
	e := &evaluator{t: t, vars: values}
	if err := e.check(t.body, nil); err != nil {
		return "", err
	}
	var b strings.Builder
	if err := e.render(&b, t.body, nil); err != nil {
		return "", err
	}
	return b.String(), nil
}

// Render is Parse and Execute: Terraform's templatefile(name, vars) where
// the file name holds src.
func Render(name string, src []byte, vars map[string]any) (string, error) {
	t, err := Parse(name, src)
	if err != nil {
		return "", err
	}
	return t.Execute(vars)
}

// RenderFS reads the template file name from fsys and renders it.
func RenderFS(fsys fs.FS, name string, vars map[string]any) (string, error) {
	src, err := fs.ReadFile(fsys, name)
	if err != nil {
		return "", fmt.Errorf("template %s: %w", name, err)
	}
	return Render(name, src, vars)
}

// errAt builds an *Error at byte offset off of the template.
func errAt(name, src string, off int, kind error, format string, args ...any) *Error {
	if off > len(src) {
		off = len(src)
	}
	line := 1 + strings.Count(src[:off], "\n")
	start := strings.LastIndexByte(src[:off], '\n') + 1
	col := 1 + utf8.RuneCountInString(src[start:off])
	return &Error{File: name, Line: line, Column: col, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// validIdent reports whether s is an HCL identifier (letters, digits,
// underscores and dashes, not starting with a digit or dash).
func validIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !isIdentRune(r, i == 0) {
			return false
		}
	}
	return true
}

func isIdentRune(r rune, first bool) bool {
	switch {
	case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		return true
	case r >= '0' && r <= '9', r == '-':
		return !first
	}
	return false
}
