package front

import (
	"fmt"
	"strconv"
	"strings"
)

// This file holds the small subset of CEL that the local_reply_config mappers of
// envoy.yaml use (Envoy's envoy.access_loggers.extension_filters.cel): the attributes
// request.path, response.code and response.code_details; string and integer literals;
// == != < <= > >=; x.startsWith('s'); ! && || and parentheses. Anything else is refused
// when the front starts.

// attrs are the attribute values a filter expression sees.
type attrs struct {
	Path    string
	Code    int
	Details string
}

type value struct {
	isStr, isInt, isBool bool
	s                    string
	i                    int64
	b                    bool
}

type expr interface {
	eval(a attrs) (value, error)
}

type (
	litExpr  struct{ v value }
	attrExpr struct{ name string }
	notExpr  struct{ x expr }
	binExpr  struct {
		op   string
		l, r expr
	}
	startsWithExpr struct{ x, prefix expr }
)

func (e litExpr) eval(attrs) (value, error) { return e.v, nil }

func (e attrExpr) eval(a attrs) (value, error) {
	switch e.name {
	case "request.path":
		return value{isStr: true, s: a.Path}, nil
	case "response.code_details":
		return value{isStr: true, s: a.Details}, nil
	case "response.code":
		return value{isInt: true, i: int64(a.Code)}, nil
	}
	return value{}, fmt.Errorf("unknown attribute %s", e.name)
}

func (e notExpr) eval(a attrs) (value, error) {
	v, err := e.x.eval(a)
	if err != nil || !v.isBool {
		return value{}, fmt.Errorf("! needs a bool")
	}
	return value{isBool: true, b: !v.b}, nil
}

func (e startsWithExpr) eval(a attrs) (value, error) {
	x, err := e.x.eval(a)
	if err != nil {
		return value{}, err
	}
	p, err := e.prefix.eval(a)
	if err != nil {
		return value{}, err
	}
	if !x.isStr || !p.isStr {
		return value{}, fmt.Errorf("startsWith needs strings")
	}
	return value{isBool: true, b: strings.HasPrefix(x.s, p.s)}, nil
}

func (e binExpr) eval(a attrs) (value, error) {
	l, err := e.l.eval(a)
	if err != nil {
		return value{}, err
	}
	switch e.op {
	case "&&", "||":
		if !l.isBool {
			return value{}, fmt.Errorf("%s needs bools", e.op)
		}
		if (e.op == "&&" && !l.b) || (e.op == "||" && l.b) {
			return l, nil
		}
		r, err := e.r.eval(a)
		if err != nil || !r.isBool {
			return value{}, fmt.Errorf("%s needs bools", e.op)
		}
		return r, nil
	}
	r, err := e.r.eval(a)
	if err != nil {
		return value{}, err
	}
	var cmp int
	switch {
	case l.isStr && r.isStr:
		cmp = strings.Compare(l.s, r.s)
	case l.isInt && r.isInt:
		cmp = compareInt(l.i, r.i)
	default:
		return value{}, fmt.Errorf("%s: mismatched operand types", e.op)
	}
	var b bool
	switch e.op {
	case "==":
		b = cmp == 0
	case "!=":
		b = cmp != 0
	case "<":
		b = cmp < 0
	case "<=":
		b = cmp <= 0
	case ">":
		b = cmp > 0
	case ">=":
		b = cmp >= 0
	}
	return value{isBool: true, b: b}, nil
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseCEL parses expression src of the supported subset and checks that it yields a bool.
func parseCEL(src string) (expr, error) {
	p := &celParser{src: src}
	p.next()
	e, err := p.parseOr()
	if err != nil {
		return nil, fmt.Errorf("CEL %q: %w", src, err)
	}
	if p.tok != "" {
		return nil, fmt.Errorf("CEL %q: unexpected %q", src, p.tok)
	}
	// Type-check with sample attributes: every supported expression is total.
	if v, err := e.eval(attrs{}); err != nil || !v.isBool {
		return nil, fmt.Errorf("CEL %q: not a boolean expression over the supported attributes (%v)", src, err)
	}
	return e, nil
}

type celParser struct {
	src    string
	pos    int
	tok    string // "" at the end
	tokStr bool   // tok is a string literal (value in str)
	str    string
}

func (p *celParser) next() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t' || p.src[p.pos] == '\n') {
		p.pos++
	}
	p.tokStr = false
	if p.pos >= len(p.src) {
		p.tok = ""
		return
	}
	c := p.src[p.pos]
	switch {
	case c == '\'' || c == '"':
		end := strings.IndexByte(p.src[p.pos+1:], c)
		if end < 0 {
			p.tok, p.pos = "<unterminated string>", len(p.src)
			return
		}
		p.str = p.src[p.pos+1 : p.pos+1+end]
		p.tok, p.tokStr = "'"+p.str+"'", true
		p.pos += end + 2
	case strings.HasPrefix(p.src[p.pos:], "&&"), strings.HasPrefix(p.src[p.pos:], "||"),
		strings.HasPrefix(p.src[p.pos:], "=="), strings.HasPrefix(p.src[p.pos:], "!="),
		strings.HasPrefix(p.src[p.pos:], "<="), strings.HasPrefix(p.src[p.pos:], ">="):
		p.tok = p.src[p.pos : p.pos+2]
		p.pos += 2
	case strings.ContainsRune("()!<>,", rune(c)):
		p.tok = string(c)
		p.pos++
	default:
		start := p.pos
		for p.pos < len(p.src) && (isIdent(p.src[p.pos]) || p.src[p.pos] == '.') {
			p.pos++
		}
		if start == p.pos {
			p.tok, p.pos = string(c), p.pos+1
			return
		}
		p.tok = p.src[start:p.pos]
	}
}

func isIdent(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

func (p *celParser) parseOr() (expr, error) {
	l, err := p.parseAnd()
	for err == nil && p.tok == "||" {
		p.next()
		var r expr
		if r, err = p.parseAnd(); err == nil {
			l = binExpr{"||", l, r}
		}
	}
	return l, err
}

func (p *celParser) parseAnd() (expr, error) {
	l, err := p.parseCmp()
	for err == nil && p.tok == "&&" {
		p.next()
		var r expr
		if r, err = p.parseCmp(); err == nil {
			l = binExpr{"&&", l, r}
		}
	}
	return l, err
}

func (p *celParser) parseCmp() (expr, error) {
	l, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	switch p.tok {
	case "==", "!=", "<", "<=", ">", ">=":
		op := p.tok
		p.next()
		r, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return binExpr{op, l, r}, nil
	}
	return l, nil
}

func (p *celParser) parseUnary() (expr, error) {
	if p.tok == "!" {
		p.next()
		x, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return notExpr{x}, nil
	}
	return p.parsePrimary()
}

func (p *celParser) parsePrimary() (expr, error) {
	switch {
	case p.tok == "":
		return nil, fmt.Errorf("unexpected end")
	case p.tokStr:
		s := p.str
		p.next()
		return litExpr{value{isStr: true, s: s}}, nil
	case p.tok == "(":
		p.next()
		e, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if p.tok != ")" {
			return nil, fmt.Errorf("missing )")
		}
		p.next()
		return e, nil
	}
	tok := p.tok
	if n, err := strconv.ParseInt(tok, 10, 64); err == nil {
		p.next()
		return litExpr{value{isInt: true, i: n}}, nil
	}
	if name, ok := strings.CutSuffix(tok, ".startsWith"); ok {
		p.next()
		if p.tok != "(" {
			return nil, fmt.Errorf("startsWith needs (")
		}
		p.next()
		arg, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if p.tok != ")" {
			return nil, fmt.Errorf("missing ) after startsWith argument")
		}
		p.next()
		if !knownAttr(name) {
			return nil, fmt.Errorf("unsupported attribute %q", name)
		}
		return startsWithExpr{attrExpr{name}, arg}, nil
	}
	if knownAttr(tok) {
		p.next()
		return attrExpr{tok}, nil
	}
	return nil, fmt.Errorf("unsupported token %q", tok)
}

func knownAttr(name string) bool {
	switch name {
	case "request.path", "response.code", "response.code_details":
		return true
	}
	return false
}
