package tftemplate

import (
	"fmt"
	"strings"
	"unicode"
)

// The flat sequence of a template's parts, before nesting.
type (
	// litPart is literal text: one line of the file at most (ending with
	// its newline), escapes resolved, strip markers applied.
	litPart struct {
		val string
	}
	interpPart struct {
		x   expr
		off int
	}
	// ctrlPart is a directive: if, else, endif, for, endfor.
	ctrlPart struct {
		kw       string
		x        expr   // if, for
		key, val string // for
		off      int
	}
)

// The tree.
type (
	node   any
	text   string
	interp struct {
		x   expr
		off int
	}
	ifNode struct {
		cond       expr
		then, els  []node
		off        int
		hasElse    bool
		elseOffset int
	}
	forNode struct {
		key, val string
		coll     expr
		body     []node
		off      int
	}
)

type parser struct {
	name string
	src  string
	i    int
}

func (p *parser) errAt(off int, kind error, format string, args ...any) *Error {
	return errAt(p.name, p.src, off, kind, format, args...)
}

func (p *parser) has(prefix string) bool { return strings.HasPrefix(p.src[p.i:], prefix) }

// parts splits the template into literal lines, interpolations and
// directives, applying the strip markers as HCL does: ${~ and %{~ trim the
// trailing whitespace of the literal token just before, ~} the leading
// whitespace of the literal token just after, a literal token ending at
// the first newline.
func (p *parser) parts() ([]any, error) {
	var parts []any
	ltrimNext, canTrimPrev := false, false
	for p.i < len(p.src) {
		ltrim, canTrim := ltrimNext, canTrimPrev
		ltrimNext, canTrimPrev = false, false
		if !p.has("${") && !p.has("%{") {
			lit := p.literal()
			if ltrim {
				lit.val = strings.TrimLeftFunc(lit.val, unicode.IsSpace)
			}
			parts = append(parts, lit)
			canTrimPrev = true
			continue
		}
		open := p.i
		isInterp := p.src[p.i] == '$'
		p.i += 2
		if p.i < len(p.src) && p.src[p.i] == '~' {
			p.i++
			if canTrim {
				lit := parts[len(parts)-1].(*litPart)
				lit.val = strings.TrimRightFunc(lit.val, unicode.IsSpace)
			}
		}
		var part any
		if isInterp {
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			part = &interpPart{x: x, off: open}
		} else {
			c, err := p.directive(open)
			if err != nil {
				return nil, err
			}
			part = c
		}
		rtrim, err := p.close(open, isInterp)
		if err != nil {
			return nil, err
		}
		ltrimNext = rtrim
		parts = append(parts, part)
	}
	return parts, nil
}

// literal reads literal text up to the next ${ or %{, or through the next
// newline, resolving the $${ and %%{ escapes.
func (p *parser) literal() *litPart {
	var b strings.Builder
	for p.i < len(p.src) {
		if p.has("$${") || p.has("%%{") {
			b.WriteString(p.src[p.i+1 : p.i+3])
			p.i += 3
			continue
		}
		if p.has("${") || p.has("%{") {
			break
		}
		c := p.src[p.i]
		b.WriteByte(c)
		p.i++
		if c == '\n' {
			break
		}
	}
	return &litPart{val: b.String()}
}

// close reads the end of a sequence, "}" or "~}", and reports whether it
// strips.
func (p *parser) close(open int, isInterp bool) (bool, error) {
	p.skipSpace()
	switch {
	case p.has("~}"):
		p.i += 2
		return true, nil
	case p.has("}"):
		p.i++
		return false, nil
	case p.i >= len(p.src):
		what := "directive"
		if isInterp {
			what = "interpolation"
		}
		return false, p.errAt(open, ErrSyntax, "unclosed template %s: no closing brace before the end of the file", what)
	}
	if isInterp {
		return false, p.errAt(p.i, ErrSyntax, "extra characters after interpolation expression (a literal ${ is written $${)")
	}
	return false, p.errAt(p.i, ErrSyntax, "extra characters in directive: expected a closing brace")
}

// directive reads a directive's keyword and its arguments.
func (p *parser) directive(open int) (*ctrlPart, error) {
	p.skipSpace()
	kwOff := p.i
	kw := p.ident()
	c := &ctrlPart{kw: kw, off: open}
	switch kw {
	case "if":
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		c.x = x
	case "else", "endif", "endfor":
	case "for":
		p.skipSpace()
		off := p.i
		c.val = p.ident()
		if c.val == "" {
			return nil, p.errAt(off, ErrSyntax, "for directive requires a variable name after 'for'")
		}
		p.skipSpace()
		if p.has(",") {
			p.i++
			p.skipSpace()
			c.key = c.val
			off = p.i
			c.val = p.ident()
			if c.val == "" {
				return nil, p.errAt(off, ErrSyntax, "for directive requires a value variable name after the comma")
			}
			p.skipSpace()
		}
		off = p.i
		if p.ident() != "in" {
			return nil, p.errAt(off, ErrSyntax, "for directive requires the 'in' keyword after the names")
		}
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		c.x = x
	case "":
		return nil, p.errAt(kwOff, ErrSyntax, "a template directive keyword (if, else, endif, for, endfor) is expected after %%{")
	default:
		return nil, p.errAt(kwOff, ErrSyntax, "%q is not a template directive keyword (if, else, endif, for, endfor)", kw)
	}
	return c, nil
}

// tree nests the flat parts into if and for nodes.
func (p *parser) tree(parts []any) ([]node, error) {
	body, end, rest, err := p.seq(parts)
	if err != nil {
		return nil, err
	}
	if end != nil {
		return nil, p.errAt(end.off, ErrSyntax, "%%{ %s } without a matching opening directive", end.kw)
	}
	if len(rest) != 0 {
		panic("tftemplate: parts left after the end")
	}
	return body, nil
}

// seq reads nodes up to an else, endif or endfor (returned, with the
// parts after it) or the end.
func (p *parser) seq(parts []any) (body []node, end *ctrlPart, rest []any, err error) {
	for len(parts) > 0 {
		part := parts[0]
		parts = parts[1:]
		switch part := part.(type) {
		case *litPart:
			if part.val != "" {
				body = append(body, text(part.val))
			}
		case *interpPart:
			body = append(body, &interp{x: part.x, off: part.off})
		case *ctrlPart:
			switch part.kw {
			case "else", "endif", "endfor":
				return body, part, parts, nil
			case "if":
				n := &ifNode{cond: part.x, off: part.off}
				var end *ctrlPart
				n.then, end, parts, err = p.seq(parts)
				if err != nil {
					return nil, nil, nil, err
				}
				if end != nil && end.kw == "else" {
					n.hasElse, n.elseOffset = true, end.off
					n.els, end, parts, err = p.seq(parts)
					if err != nil {
						return nil, nil, nil, err
					}
				}
				if end == nil {
					return nil, nil, nil, p.errAt(part.off, ErrSyntax, "%%{ if } without a matching %%{ endif }")
				}
				if end.kw != "endif" {
					return nil, nil, nil, p.errAt(end.off, ErrSyntax, "%%{ %s } inside %%{ if } (line %d): expected %%{ endif }", end.kw, p.errAt(part.off, nil, "").Line)
				}
				body = append(body, n)
			case "for":
				n := &forNode{key: part.key, val: part.val, coll: part.x, off: part.off}
				var end *ctrlPart
				n.body, end, parts, err = p.seq(parts)
				if err != nil {
					return nil, nil, nil, err
				}
				if end == nil {
					return nil, nil, nil, p.errAt(part.off, ErrSyntax, "%%{ for } without a matching %%{ endfor }")
				}
				if end.kw != "endfor" {
					return nil, nil, nil, p.errAt(end.off, ErrSyntax, "%%{ %s } inside %%{ for } (line %d): expected %%{ endfor }", end.kw, p.errAt(part.off, nil, "").Line)
				}
				body = append(body, n)
			}
		}
	}
	return body, nil, nil, nil
}

// Expressions.

type (
	expr    any
	litExpr struct {
		v any
	}
	varExpr struct {
		name string
		off  int
	}
	callExpr struct {
		name string
		args []expr
		off  int
	}
	listExpr struct {
		elems []expr
	}
	indexExpr struct {
		coll, key expr
		off       int
	}
	notExpr struct {
		x   expr
		off int
	}
	binExpr struct {
		op   string
		x, y expr
		off  int
	}
	condExpr struct {
		cond, a, b expr
		off        int
	}
)

// skipSpace skips whitespace (newlines included: they do not end an
// expression inside a template sequence).
func (p *parser) skipSpace() {
	for p.i < len(p.src) {
		switch p.src[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) ident() string {
	start := p.i
	for p.i < len(p.src) && isIdentRune(rune(p.src[p.i]), p.i == start) {
		p.i++
	}
	return p.src[start:p.i]
}

func (p *parser) expr() (expr, error) {
	x, err := p.or()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if !p.has("?") {
		return x, nil
	}
	off := p.i
	p.i++
	a, err := p.expr()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if !p.has(":") {
		return nil, p.errAt(p.i, ErrSyntax, "expected ':' in the conditional expression")
	}
	p.i++
	b, err := p.expr()
	if err != nil {
		return nil, err
	}
	return &condExpr{cond: x, a: a, b: b, off: off}, nil
}

func (p *parser) or() (expr, error)  { return p.binary([]string{"||"}, p.and) }
func (p *parser) and() (expr, error) { return p.binary([]string{"&&"}, p.eq) }
func (p *parser) eq() (expr, error)  { return p.binary([]string{"==", "!="}, p.unary) }

func (p *parser) binary(ops []string, next func() (expr, error)) (expr, error) {
	x, err := next()
	if err != nil {
		return nil, err
	}
	for {
		p.skipSpace()
		op := ""
		for _, o := range ops {
			if p.has(o) {
				op = o
			}
		}
		if op == "" {
			return x, nil
		}
		off := p.i
		p.i += len(op)
		y, err := next()
		if err != nil {
			return nil, err
		}
		x = &binExpr{op: op, x: x, y: y, off: off}
	}
}

func (p *parser) unary() (expr, error) {
	p.skipSpace()
	if p.has("!") && !p.has("!=") {
		off := p.i
		p.i++
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &notExpr{x: x, off: off}, nil
	}
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		p.skipSpace()
		if !p.has("[") {
			return x, nil
		}
		off := p.i
		p.i++
		k, err := p.expr()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if !p.has("]") {
			return nil, p.errAt(p.i, ErrSyntax, "expected ']' to close the index")
		}
		p.i++
		x = &indexExpr{coll: x, key: k, off: off}
	}
}

func (p *parser) primary() (expr, error) {
	p.skipSpace()
	off := p.i
	if p.i >= len(p.src) {
		return nil, p.errAt(off, ErrSyntax, "expected an expression before the end of the file")
	}
	c := p.src[p.i]
	switch {
	case c == '"':
		s, err := p.quoted()
		if err != nil {
			return nil, err
		}
		return &litExpr{v: s}, nil
	case c >= '0' && c <= '9':
		for p.i < len(p.src) && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
			p.i++
		}
		if p.has(".") || p.has("e") || p.has("E") {
			return nil, p.errAt(off, ErrSyntax, "only integer numbers are supported")
		}
		var n int64
		if _, err := fmt.Sscan(p.src[off:p.i], &n); err != nil {
			return nil, p.errAt(off, ErrSyntax, "number %s: %v", p.src[off:p.i], err)
		}
		return &litExpr{v: n}, nil
	case c == '(':
		p.i++
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if !p.has(")") {
			return nil, p.errAt(p.i, ErrSyntax, "expected ')'")
		}
		p.i++
		return x, nil
	case c == '[':
		p.i++
		l := &listExpr{}
		for {
			p.skipSpace()
			if p.has("]") {
				p.i++
				return l, nil
			}
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			l.elems = append(l.elems, x)
			p.skipSpace()
			switch {
			case p.has(","):
				p.i++
			case p.has("]"):
			default:
				return nil, p.errAt(p.i, ErrSyntax, "expected ',' or ']' in the list")
			}
		}
	case isIdentRune(rune(c), true):
		name := p.ident()
		switch name {
		case "true":
			return &litExpr{v: true}, nil
		case "false":
			return &litExpr{v: false}, nil
		case "null":
			return &litExpr{v: nil}, nil
		}
		p.skipSpace()
		if !p.has("(") {
			if p.has(".") {
				return nil, p.errAt(p.i, ErrSyntax, "attribute access (%s.…) is not supported", name)
			}
			return &varExpr{name: name, off: off}, nil
		}
		p.i++
		call := &callExpr{name: name, off: off}
		for {
			p.skipSpace()
			if p.has(")") {
				p.i++
				return call, nil
			}
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			call.args = append(call.args, x)
			p.skipSpace()
			switch {
			case p.has(","):
				p.i++
			case p.has(")"):
			case p.has("..."):
				return nil, p.errAt(p.i, ErrSyntax, "argument expansion (...) is not supported")
			default:
				return nil, p.errAt(p.i, ErrSyntax, "expected ',' or ')' in the arguments of %s", name)
			}
		}
	}
	return nil, p.errAt(off, ErrSyntax, "expected an expression, found %q", c)
}

// quoted reads a quoted string literal with its backslash escapes.
func (p *parser) quoted() (string, error) {
	open := p.i
	p.i++
	var b strings.Builder
	for {
		if p.i >= len(p.src) || p.src[p.i] == '\n' {
			return "", p.errAt(open, ErrSyntax, "unterminated string literal")
		}
		switch {
		case p.has(`"`):
			p.i++
			return b.String(), nil
		case p.has("$${") || p.has("%%{"):
			b.WriteString(p.src[p.i+1 : p.i+3])
			p.i += 3
		case p.has("${") || p.has("%{"):
			return "", p.errAt(p.i, ErrSyntax, "template sequences inside quoted strings are not supported")
		case p.has(`\`):
			if p.i+1 >= len(p.src) {
				return "", p.errAt(open, ErrSyntax, "unterminated string literal")
			}
			esc := p.src[p.i+1]
			switch esc {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case '"':
				b.WriteByte('"')
			case '\\':
				b.WriteByte('\\')
			case 'u', 'U':
				n := 4
				if esc == 'U' {
					n = 8
				}
				hex := p.src[p.i+2 : min(p.i+2+n, len(p.src))]
				var r rune
				if len(hex) != n {
					return "", p.errAt(p.i, ErrSyntax, "\\%c needs %d hex digits", esc, n)
				}
				for _, h := range hex {
					var d rune
					switch {
					case h >= '0' && h <= '9':
						d = h - '0'
					case h >= 'a' && h <= 'f':
						d = h - 'a' + 10
					case h >= 'A' && h <= 'F':
						d = h - 'A' + 10
					default:
						return "", p.errAt(p.i, ErrSyntax, "\\%c needs %d hex digits", esc, n)
					}
					r = r<<4 | d
				}
				b.WriteRune(r)
				p.i += n
			default:
				return "", p.errAt(p.i, ErrSyntax, "invalid escape sequence \\%c", esc)
			}
			p.i += 2
		default:
			b.WriteByte(p.src[p.i])
			p.i++
		}
	}
}
