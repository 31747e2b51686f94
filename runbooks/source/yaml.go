package source

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Document is one parsed YAML document with its file name.
type Document struct {
	File string
	Root *yaml.Node // the document's top-level value (a mapping for valid files)
}

// Bounds on what a file may hold: runbooks, inventories and ChatOps
// configs are small, and a loader must not be made to use unbounded
// memory by a few bytes of anchors and aliases.
const (
	// MaxFileBytes is the largest file Kedge reads as YAML.
	MaxFileBytes = 1 << 20
	// MaxNodes bounds a document's nodes with every alias expanded.
	MaxNodes = 100_000
	// MaxExpandedBytes bounds a document's scalar text with every alias
	// expanded: 45,000 aliases to one 820 KB scalar are 45,000 nodes in a
	// 1 MiB file, and 37 GB once a loader or a plan copies them out.
	MaxExpandedBytes = 4 << 20
)

// ReadFile parses every YAML document in a file of at most MaxFileBytes.
func ReadFile(path string) ([]Document, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, Errors{{Pos: Pos{File: path, Line: 1, Col: 1}, Msg: fmt.Sprintf("file is over %d bytes: too large for a runbook, inventory or config", MaxFileBytes)}}
	}
	return Parse(path, data)
}

// Parse parses every YAML document in data. A syntax error is reported at
// its line; a document whose aliases expand it past MaxNodes nodes or
// MaxExpandedBytes bytes of scalar text is refused at the alias that takes
// it there.
func Parse(file string, data []byte) ([]Document, error) {
	if len(data) > MaxFileBytes {
		return nil, Errors{{Pos: Pos{File: file, Line: 1, Col: 1}, Msg: fmt.Sprintf("file is over %d bytes: too large for a runbook, inventory or config", MaxFileBytes)}}
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var docs []Document
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, Errors{syntaxError(file, err)}
		}
		if len(n.Content) == 0 {
			continue
		}
		if alias, why := withinBounds(&n); alias != nil {
			return nil, Errors{{Pos: At(file, alias), Msg: why}}
		}
		docs = append(docs, Document{File: file, Root: n.Content[0]})
	}
	if len(docs) == 0 {
		return nil, Errors{{Pos: Pos{File: file, Line: 1, Col: 1}, Msg: "empty document"}}
	}
	return docs, nil
}

// expansion is what a node stands for with every alias in it expanded.
type expansion struct {
	nodes int // itself and every node under it
	bytes int // scalar text
}

func (e expansion) over() bool { return e.nodes > MaxNodes || e.bytes > MaxExpandedBytes }

func (e expansion) add(o expansion) expansion {
	return expansion{nodes: min(e.nodes+o.nodes, MaxNodes+1), bytes: min(e.bytes+o.bytes, MaxExpandedBytes+1)}
}

// withinBounds returns nil if n, every alias expanded, has at most
// MaxNodes nodes and MaxExpandedBytes bytes of scalar text; otherwise the
// alias at which the document, read in order, goes over, and why. Each
// node's expanded size is computed once, so the check is linear in the
// document's own size whatever the aliases multiply.
func withinBounds(n *yaml.Node) (*yaml.Node, string) {
	sizes := map[*yaml.Node]expansion{}
	var size func(n *yaml.Node) expansion
	size = func(n *yaml.Node) expansion {
		if s, ok := sizes[n]; ok {
			return s
		}
		// a node met again while being sized is a cycle
		sizes[n] = expansion{nodes: MaxNodes + 1, bytes: MaxExpandedBytes + 1}
		s := expansion{nodes: 1}
		if n.Kind == yaml.ScalarNode {
			s.bytes = min(len(n.Value), MaxExpandedBytes+1)
		}
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			s = s.add(size(n.Alias))
		}
		for _, c := range n.Content {
			if s.over() {
				break
			}
			s = s.add(size(c))
		}
		sizes[n] = s
		return s
	}
	// Read in document order, adding each alias's expansion as it comes.
	var total expansion
	var walk func(n *yaml.Node) *yaml.Node
	walk = func(n *yaml.Node) *yaml.Node {
		if n.Kind == yaml.AliasNode {
			total = total.add(size(n))
			if total.over() {
				return n
			}
			return nil
		}
		total = total.add(expansion{nodes: 1, bytes: len(n.Value) * boolInt(n.Kind == yaml.ScalarNode)})
		for _, c := range n.Content {
			if a := walk(c); a != nil {
				return a
			}
		}
		return nil
	}
	alias := walk(n)
	switch {
	case alias == nil:
		return nil, ""
	case total.nodes > MaxNodes:
		return alias, fmt.Sprintf("aliases expand the document to more than %d nodes", MaxNodes)
	}
	return alias, fmt.Sprintf("aliases expand the document to more than %d bytes of text", MaxExpandedBytes)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// syntaxError turns a yaml.v3 error ("yaml: line 3: ...") into a positioned one.
func syntaxError(file string, err error) Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ") // third-party message: gopkg.in/yaml.v3 has no typed syntax error
	line := 1
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, tail, ok := strings.Cut(rest, ":"); ok {
			if n, convErr := strconv.Atoi(num); convErr == nil {
				line, msg = n, strings.TrimSpace(tail)
			}
		}
	}
	return Error{Pos: Pos{File: file, Line: line, Col: 1}, Msg: "invalid YAML: " + msg}
}

// Field is one key of a mapping as the decoder saw it.
type Field struct {
	Key   *yaml.Node
	Value *yaml.Node
}

// Fields decodes a mapping strictly: every key must be one of known (the
// handler is called with the value), duplicate and unknown keys are errors.
// what names the mapping in messages ("step", "metadata").
func Fields(file string, n *yaml.Node, what string, errs *Errors, known map[string]func(v *yaml.Node)) {
	if n == nil {
		return
	}
	if n.Kind != yaml.MappingNode {
		errs.Addf(At(file, n), "%s must be a mapping, got %s", what, KindName(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			errs.Addf(At(file, k), "duplicate field %q in %s", k.Value, what)
			continue
		}
		seen[k.Value] = true
		h, ok := known[k.Value]
		if !ok {
			errs.Addf(At(file, k), "unknown field %q in %s (known: %s)", k.Value, what, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
			continue
		}
		h(v)
	}
}

// Pairs returns a mapping's key/value pairs in source order, reporting
// duplicates.
func Pairs(file string, n *yaml.Node, what string, errs *Errors) []Field {
	if n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		errs.Addf(At(file, n), "%s must be a mapping, got %s", what, KindName(n))
		return nil
	}
	seen := map[string]bool{}
	var out []Field
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if seen[k.Value] {
			errs.Addf(At(file, k), "duplicate key %q in %s", k.Value, what)
			continue
		}
		seen[k.Value] = true
		out = append(out, Field{Key: k, Value: n.Content[i+1]})
	}
	return out
}

// String decodes a scalar string.
func String(file string, n *yaml.Node, what string, errs *Errors) string {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		errs.Addf(At(file, n), "%s must be a string, got %s", what, KindName(n))
		return ""
	}
	return n.Value
}

// Bool decodes a YAML boolean.
func Bool(file string, n *yaml.Node, what string, errs *Errors) bool {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		errs.Addf(At(file, n), "%s must be true or false, got %s", what, KindName(n))
		return false
	}
	return n.Value == "true"
}

// Int decodes a YAML integer.
func Int(file string, n *yaml.Node, what string, errs *Errors) int {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		errs.Addf(At(file, n), "%s must be an integer, got %s", what, KindName(n))
		return 0
	}
	v, err := strconv.ParseInt(n.Value, 0, 64)
	if err != nil {
		errs.Addf(At(file, n), "%s: %v", what, err)
	}
	return int(v)
}

// Float decodes a YAML number.
func Float(file string, n *yaml.Node, what string, errs *Errors) float64 {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!float" && n.Tag != "!!int") {
		errs.Addf(At(file, n), "%s must be a number, got %s", what, KindName(n))
		return 0
	}
	v, err := strconv.ParseFloat(n.Value, 64)
	if err != nil {
		errs.Addf(At(file, n), "%s: %v", what, err)
	}
	return v
}

// Duration decodes a Go duration string such as "90s" or "5m".
func Duration(file string, n *yaml.Node, what string, errs *Errors) time.Duration {
	s := String(file, n, what, errs)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		errs.Addf(At(file, n), "%s: %q is not a duration (examples: 30s, 5m, 1h30m)", what, s)
		return 0
	}
	if d < 0 {
		errs.Addf(At(file, n), "%s must not be negative", what)
	}
	return d
}

// Strings decodes a sequence of strings.
func Strings(file string, n *yaml.Node, what string, errs *Errors) []string {
	if n.Kind != yaml.SequenceNode {
		errs.Addf(At(file, n), "%s must be a list, got %s", what, KindName(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for _, c := range n.Content {
		out = append(out, String(file, c, what+" item", errs))
	}
	return out
}

// Value decodes any YAML value into plain Go values (string, int64, float64,
// bool, nil, []any, map[string]any).
func Value(file string, n *yaml.Node, errs *Errors) any {
	switch n.Kind {
	case yaml.AliasNode:
		return Value(file, n.Alias, errs)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			out = append(out, Value(file, c, errs))
		}
		return out
	case yaml.MappingNode:
		out := map[string]any{}
		for _, f := range Pairs(file, n, "mapping", errs) {
			out[f.Key.Value] = Value(file, f.Value, errs)
		}
		return out
	}
	var v any
	if err := n.Decode(&v); err != nil {
		errs.Addf(At(file, n), "%v", err)
		return nil
	}
	if i, ok := v.(int); ok {
		return int64(i)
	}
	return v
}

// KindName names a node's kind for messages.
func KindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.Tag {
	case "!!null":
		return "null"
	case "!!bool":
		return "a boolean"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	}
	return fmt.Sprintf("the string %q", n.Value)
}
