package constrain

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// CompileGBNF compiles a grammar in llama.cpp's GBNF dialect: rules
// "name ::= alternatives" (a rule runs until the next "name ::="), starting
// at rule "root"; alternatives separated by |; sequences of string literals
// ("..." with \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH escapes), character
// classes ([a-z0-9_], [^"\\], with the same escapes), "." (any character),
// rule names, groups (...), and the postfix operators * + ? {m} {m,} {m,n};
// comments run from # to the end of the line.
func CompileGBNF(text string) (*Grammar, error) {
	return CompileGBNFSchemas(text, nil)
}

// CompileGBNFSchemas is CompileGBNF with some rules defined by JSON Schemas
// instead of in the text: rule name of schemas matches the compact JSON
// texts that validate against schemas[name] (as CompileJSONSchema
// compiles it; a $ref resolves within that schema). The text uses these
// rules and must not define them. This is how a grammar around JSON
// (a tool call's syntax around its arguments) enforces a schema inside.
func CompileGBNFSchemas(text string, schemas map[string]string) (*Grammar, error) {
	n := len(text)
	for _, s := range schemas {
		n += len(s)
	}
	if n > MaxSourceBytes {
		return nil, tooLargef("grammar of %d bytes, at most %d", n, MaxSourceBytes)
	}
	p := &gbnfParser{src: text, b: &builder{}, rules: map[string]int32{}, defined: map[string]bool{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(schemas)) {
		if p.defined[name] {
			return nil, invalidf("grammar: rule %q is defined by a schema and in the text", name)
		}
		if !validRuleName(name) {
			return nil, invalidf("grammar: %q is not a rule name", name)
		}
		root, err := parseJSON([]byte(schemas[name]))
		if err != nil {
			return nil, invalidf("schema of rule %q is not JSON: %v", name, err)
		}
		c := &schemaCompiler{b: p.b, root: root, refs: map[string]int32{}}
		seq, err := c.schema(root, "#", 0)
		if err != nil {
			return nil, fmt.Errorf("schema of rule %q: %w", name, err)
		}
		p.b.setAlts(p.rule(name), seq)
		if p.b.err != nil {
			return nil, p.b.err
		}
		p.defined[name] = true
	}
	root, ok := p.rules["root"]
	if !ok || !p.defined["root"] {
		return nil, invalidf("grammar: no rule named root")
	}
	for name := range p.rules {
		if !p.defined[name] {
			return nil, invalidf("grammar: rule %q is used but not defined", name)
		}
	}
	return p.b.finish([]item{refItem(root)})
}

type gbnfParser struct {
	src     string
	pos     int
	b       *builder
	rules   map[string]int32
	defined map[string]bool
}

func (p *gbnfParser) errf(format string, args ...any) error {
	line := 1 + strings.Count(p.src[:p.pos], "\n")
	return invalidf("grammar line %d: "+format, append([]any{line}, args...)...)
}

// skip passes over spaces, newlines and comments.
func (p *gbnfParser) skip() {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

func validRuleName(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if !isNameByte(s[i]) {
			return false
		}
	}
	return true
}

func isNameByte(c byte) bool {
	return c == '-' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func (p *gbnfParser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// atDefinition reports whether a "name ::=" starts at the position.
func (p *gbnfParser) atDefinition() bool {
	save := p.pos
	defer func() { p.pos = save }()
	if p.name() == "" {
		return false
	}
	p.skip()
	return strings.HasPrefix(p.src[p.pos:], "::=")
}

func (p *gbnfParser) rule(name string) int32 {
	r, ok := p.rules[name]
	if !ok {
		r = p.b.newRule()
		p.rules[name] = r
	}
	return r
}

func (p *gbnfParser) parse() error {
	for p.skip(); p.pos < len(p.src); p.skip() {
		name := p.name()
		if name == "" {
			return p.errf("expected a rule name")
		}
		p.skip()
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return p.errf("expected ::= after %q", name)
		}
		p.pos += 3
		if p.defined[name] {
			return p.errf("rule %q defined twice", name)
		}
		p.defined[name] = true
		r := p.rule(name)
		alts, err := p.alternatives(0, true)
		if err != nil {
			return err
		}
		p.b.setAlts(r, alts...)
		if p.b.err != nil {
			return p.b.err
		}
	}
	return nil
}

// alternatives parses seq | seq | ... up to ")" (inside a group) or the
// next rule definition or the end (top level).
func (p *gbnfParser) alternatives(depth int, top bool) ([][]item, error) {
	if depth > MaxNesting {
		return nil, tooLargef("grammar groups nested deeper than %d", MaxNesting)
	}
	var alts [][]item
	var seq []item
	for {
		p.skip()
		if p.pos >= len(p.src) || top && p.atDefinition() {
			if !top {
				return nil, p.errf("unclosed (")
			}
			return append(alts, seq), nil
		}
		c := p.src[p.pos]
		switch {
		case c == '|':
			p.pos++
			alts, seq = append(alts, seq), nil
			continue
		case c == ')':
			if top {
				return nil, p.errf("unexpected )")
			}
			p.pos++
			return append(alts, seq), nil
		}
		atom, err := p.atom(depth)
		if err != nil {
			return nil, err
		}
		if atom, err = p.postfix(atom); err != nil {
			return nil, err
		}
		seq = append(seq, atom...)
		if p.b.err != nil {
			return nil, p.b.err
		}
	}
}

func (p *gbnfParser) atom(depth int) ([]item, error) {
	c := p.src[p.pos]
	switch {
	case c == '"':
		p.pos++
		var out []item
		for {
			if p.pos >= len(p.src) {
				return nil, p.errf("unterminated string")
			}
			if p.src[p.pos] == '"' {
				p.pos++
				return out, nil
			}
			r, err := p.char()
			if err != nil {
				return nil, err
			}
			out = append(out, p.b.literalRune(r, false)...)
		}
	case c == '[':
		p.pos++
		neg := false
		if p.pos < len(p.src) && p.src[p.pos] == '^' {
			neg = true
			p.pos++
		}
		var ranges []rune
		for {
			if p.pos >= len(p.src) {
				return nil, p.errf("unterminated character class")
			}
			if p.src[p.pos] == ']' {
				p.pos++
				break
			}
			lo, err := p.char()
			if err != nil {
				return nil, err
			}
			hi := lo
			if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
				p.pos++
				if hi, err = p.char(); err != nil {
					return nil, err
				}
				if hi < lo {
					return nil, p.errf("character range out of order")
				}
			}
			ranges = append(ranges, lo, hi)
		}
		ranges = sortRanges(ranges)
		if neg {
			ranges = negate(ranges)
		}
		return p.b.runeClass(ranges), nil
	case c == '.':
		p.pos++
		return p.b.runeClass([]rune{0, utf8.MaxRune}), nil
	case c == '(':
		p.pos++
		alts, err := p.alternatives(depth+1, false)
		if err != nil {
			return nil, err
		}
		return p.b.rule(alts...), nil
	case isNameByte(c):
		return []item{refItem(p.rule(p.name()))}, nil
	}
	return nil, p.errf("unexpected %q", c)
}

// char reads one character of a literal or class, with escapes.
func (p *gbnfParser) char() (rune, error) {
	if p.src[p.pos] != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		p.pos += n
		return r, nil
	}
	p.pos++
	if p.pos >= len(p.src) {
		return 0, p.errf("escape at the end")
	}
	c := p.src[p.pos]
	p.pos++
	switch c {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
		if p.pos+n > len(p.src) {
			return 0, p.errf("short \\%c escape", c)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil {
			return 0, p.errf("bad \\%c escape", c)
		}
		p.pos += n
		return rune(v), nil
	case '\\', '"', '[', ']', '-', '^', '/':
		return rune(c), nil
	}
	return 0, p.errf("unknown escape \\%c", c)
}

func (p *gbnfParser) postfix(atom []item) ([]item, error) {
	for p.skip(); p.pos < len(p.src); p.skip() {
		switch p.src[p.pos] {
		case '*':
			p.pos++
			atom = p.b.star(atom)
		case '+':
			p.pos++
			atom = p.b.repeat(atom, 1, -1)
		case '?':
			p.pos++
			atom = p.b.opt(atom)
		case '{':
			end := strings.IndexByte(p.src[p.pos:], '}')
			if end < 0 {
				return nil, p.errf("unclosed {")
			}
			spec := strings.TrimSpace(p.src[p.pos+1 : p.pos+end])
			p.pos += end + 1
			lo, hi, err := parseCount(spec)
			if err != nil {
				return nil, p.errf("bad repetition {%s}", spec)
			}
			if lo > MaxRepeat || hi > MaxRepeat {
				return nil, tooLargef("a repetition count over %d", MaxRepeat)
			}
			atom = p.b.repeat(atom, lo, hi)
		default:
			return atom, nil
		}
	}
	return atom, nil
}

// parseCount parses "m", "m," or "m,n" (hi -1: unbounded).
func parseCount(spec string) (int, int, error) {
	a, b, comma := strings.Cut(spec, ",")
	lo, err := strconv.Atoi(strings.TrimSpace(a))
	if err != nil || lo < 0 {
		return 0, 0, strconv.ErrSyntax
	}
	if !comma {
		return lo, lo, nil
	}
	if b = strings.TrimSpace(b); b == "" {
		return lo, -1, nil
	}
	hi, err := strconv.Atoi(b)
	if err != nil || hi < lo {
		return 0, 0, strconv.ErrSyntax
	}
	return lo, hi, nil
}
