package constrain

import (
	"errors"
	"fmt"
)

// ErrInvalid wraps every error of a constraint that cannot be compiled: a
// malformed or unsupported schema, regex, choice list or grammar. The
// server maps it to INVALID_ARGUMENT.
var ErrInvalid = errors.New("invalid constraint")

// ErrTooLarge wraps ErrInvalid for constraints over the compile limits
// (Limits): too large, too deeply nested, or too many states.
var ErrTooLarge = fmt.Errorf("%w: too large", ErrInvalid)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

func tooLargef(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrTooLarge}, args...)...)
}

// Limits bound the cost of compiling one constraint, so that a hostile
// schema or grammar is refused quickly instead of stalling the server.
const (
	// MaxSourceBytes bounds the text of a schema, regex, choice list or
	// grammar.
	MaxSourceBytes = 256 << 10
	// MaxItems bounds the compiled grammar: the total number of elements
	// over all rules (a repetition {m,n} costs its body about n times).
	MaxItems = 1 << 18
	// MaxNesting bounds the nesting of schemas, regex groups and grammar
	// groups.
	MaxNesting = 64
	// MaxRepeat bounds one counted repetition (minLength, maxItems,
	// {m,n}).
	MaxRepeat = 4096
	// MaxStackDepth bounds the pushdown stack while running: an input that
	// nests deeper (say, 300 levels of "[" in a recursive schema) cannot
	// continue that way.
	MaxStackDepth = 256
	// MaxStacks bounds the number of parse stacks one state keeps (an
	// ambiguous grammar can have several); the extra ones are dropped.
	MaxStacks = 256
)

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) addRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s.add(byte(c))
	}
}
func (s *byteSet) union(o *byteSet) {
	for i := range s {
		s[i] |= o[i]
	}
}
func (s *byteSet) empty() bool { return s[0]|s[1]|s[2]|s[3] == 0 }

// item is one element of a rule's alternative while building: a byte from
// a set (ref < 0) or a reference to rule ref.
type item struct {
	ref int32
	set byteSet
}

func byteItem(s byteSet) item { return item{ref: -1, set: s} }
func refItem(r int32) item    { return item{ref: r} }

// builder assembles a grammar: rules, each a list of alternatives, each a
// sequence of items. Helpers return sequences ([]item) so that they
// compose; anything needing alternation or repetition becomes a new rule
// referenced by one item.
type builder struct {
	rules [][][]item
	size  int
	err   error // the first limit exceeded
}

func (b *builder) newRule() int32 {
	b.rules = append(b.rules, nil)
	return int32(len(b.rules) - 1)
}

func (b *builder) setAlts(r int32, alts ...[]item) {
	for _, a := range alts {
		b.size += len(a) + 1
	}
	if b.size > MaxItems && b.err == nil {
		b.err = tooLargef("the compiled grammar exceeds %d elements", MaxItems)
	}
	b.rules[r] = alts
}

// rule makes a rule with the given alternatives and returns a reference to it.
func (b *builder) rule(alts ...[]item) []item {
	r := b.newRule()
	b.setAlts(r, alts...)
	return []item{refItem(r)}
}

func lit(s string) []item {
	out := make([]item, len(s))
	for i := 0; i < len(s); i++ {
		var set byteSet
		set.add(s[i])
		out[i] = byteItem(set)
	}
	return out
}

func cat(seqs ...[]item) []item {
	var out []item
	for _, s := range seqs {
		out = append(out, s...)
	}
	return out
}

func (b *builder) alt(seqs ...[]item) []item {
	if len(seqs) == 1 {
		return seqs[0]
	}
	return b.rule(seqs...)
}

func (b *builder) opt(seq []item) []item { return b.rule(seq, nil) }

// star is seq repeated any number of times: R ::= seq R | ε.
func (b *builder) star(seq []item) []item {
	r := b.newRule()
	b.setAlts(r, cat(seq, []item{refItem(r)}), nil)
	return []item{refItem(r)}
}

// repeat is seq repeated min to max times (max < 0: unbounded), as min
// copies followed by nested options (seq (seq (seq)?)?)?, which stays
// unambiguous.
func (b *builder) repeat(seq []item, lo, hi int) []item {
	if lo > MaxRepeat || hi > MaxRepeat {
		if b.err == nil {
			b.err = tooLargef("a repetition count over %d", MaxRepeat)
		}
		return nil
	}
	// Check the size before building: the copies are inlined.
	if (len(seq)+1)*max(lo, hi, 1) > MaxItems-b.size {
		if b.err == nil {
			b.err = tooLargef("the compiled grammar exceeds %d elements", MaxItems)
		}
		return nil
	}
	b.size += len(seq) * lo // the inlined copies
	var out []item
	for i := 0; i < lo; i++ {
		out = append(out, seq...)
	}
	if hi < 0 {
		return append(out, b.star(seq)...)
	}
	var tail []item
	for i := lo; i < hi; i++ {
		tail = b.opt(cat(seq, tail))
		if b.err != nil {
			return nil
		}
	}
	return append(out, tail...)
}

// elem kinds of a compiled grammar.
const (
	kBytes = iota // consume one byte of sets[arg]
	kRule         // expand rule arg
	kEnd          // end of an alternative
)

type elem struct {
	kind uint8
	arg  int32
}

// Grammar is a compiled constraint over bytes: a context-free grammar run
// as a pushdown automaton (see doc.go). It is immutable and safe for
// concurrent use; each sequence runs it from its own State.
type Grammar struct {
	elems []elem
	sets  []byteSet
	alts  [][]int32 // per rule, the position of each alternative's first element
	root  int32
}

// finish flattens the builder into a Grammar whose start rule is root, and
// refuses grammars that could loop without consuming input.
func (b *builder) finish(root []item) (*Grammar, error) {
	if b.err != nil {
		return nil, b.err
	}
	start := b.newRule()
	b.setAlts(start, root)
	if b.err != nil {
		return nil, b.err
	}
	g := &Grammar{root: start, alts: make([][]int32, len(b.rules))}
	setIdx := map[byteSet]int32{}
	for r, alts := range b.rules {
		for _, a := range alts {
			g.alts[r] = append(g.alts[r], int32(len(g.elems)))
			for _, it := range a {
				if it.ref >= 0 {
					g.elems = append(g.elems, elem{kind: kRule, arg: it.ref})
					continue
				}
				i, ok := setIdx[it.set]
				if !ok {
					i = int32(len(g.sets))
					g.sets = append(g.sets, it.set)
					setIdx[it.set] = i
				}
				g.elems = append(g.elems, elem{kind: kBytes, arg: i})
			}
			g.elems = append(g.elems, elem{kind: kEnd})
		}
	}
	if err := g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	return g, nil
}

// checkLeftRecursion refuses a rule that can reach itself without
// consuming a byte (left recursion, or a repetition of a part that can
// match nothing): running it would push frames forever.
func (g *Grammar) checkLeftRecursion() error {
	n := len(g.alts)
	nullable := make([]bool, n)
	for changed := true; changed; {
		changed = false
		for r := range n {
			if nullable[r] {
				continue
			}
			for _, p := range g.alts[r] {
				if g.nullableFrom(p, nullable) {
					nullable[r], changed = true, true
					break
				}
			}
		}
	}
	// left[r]: rules reachable from r at the leftmost position.
	left := make([][]int32, n)
	for r := range n {
		for _, p := range g.alts[r] {
			for ; g.elems[p].kind == kRule; p++ {
				left[r] = append(left[r], g.elems[p].arg)
				if !nullable[g.elems[p].arg] {
					break
				}
			}
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, n)
	var visit func(r int32) bool
	visit = func(r int32) bool {
		color[r] = grey
		for _, s := range left[r] {
			switch color[s] {
			case grey:
				return false
			case white:
				if !visit(s) {
					return false
				}
			}
		}
		color[r] = black
		return true
	}
	for r := range n {
		if color[r] == white && !visit(int32(r)) {
			return invalidf("a rule can repeat without consuming input (left recursion, or a repetition of something that can be empty)")
		}
	}
	return nil
}

func (g *Grammar) nullableFrom(p int32, nullable []bool) bool {
	for ; ; p++ {
		switch e := g.elems[p]; e.kind {
		case kEnd:
			return true
		case kBytes:
			return false
		case kRule:
			if !nullable[e.arg] {
				return false
			}
		}
	}
}

// Size reports the number of grammar elements (a measure of the compiled
// constraint's size).
func (g *Grammar) Size() int { return len(g.elems) }
