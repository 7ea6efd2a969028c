package constrain

import (
	"encoding/binary"
	"slices"
)

// frame is one level of a parse stack: pos is the position in Grammar.elems
// where this level continues, next the level below (nil at the bottom),
// depth the number of levels down to the bottom, this one included.
// Frames are immutable and shared between stacks.
type frame struct {
	pos   int32
	depth int32
	next  *frame
}

// State is where a sequence is in its grammar: the set of parse stacks
// still alive, each with a byte element on top, and whether the input so
// far is a complete sentence. A State is immutable: Advance returns a new
// one, so states can be kept and compared freely.
type State struct {
	stacks []*frame
	accept bool
}

// Dead reports that no continuation exists and the input is not complete.
func (s State) Dead() bool { return len(s.stacks) == 0 && !s.accept }

// Accepting reports that the input so far is a complete sentence.
func (s State) Accepting() bool { return s.accept }

// Start returns the state before any input.
func (g *Grammar) Start() State {
	var e expander
	e.g = g
	for _, p := range g.alts[g.root] {
		e.expand(&frame{pos: p, depth: 1})
	}
	return e.state()
}

// expander collects the stacks reached by expanding rule references and
// alternative ends until each stack has a byte element on top.
type expander struct {
	g      *Grammar
	stacks []*frame
	accept bool
}

func (e *expander) expand(f *frame) {
	for {
		el := e.g.elems[f.pos]
		switch el.kind {
		case kBytes:
			if len(e.stacks) >= MaxStacks {
				return
			}
			for _, o := range e.stacks {
				if o.pos == f.pos && o.next == f.next {
					return
				}
			}
			e.stacks = append(e.stacks, f)
			return
		case kEnd:
			if f.next == nil {
				e.accept = true
				return
			}
			f = f.next
		case kRule:
			// The continuation is the element after the reference; when
			// that ends the alternative, the frame below continues
			// directly (a tail call), so repetitions (R ::= x R | ε) run
			// in constant stack depth.
			cont := f.next
			if e.g.elems[f.pos+1].kind != kEnd {
				cont = &frame{pos: f.pos + 1, depth: f.depth, next: f.next}
			}
			d := int32(1)
			if cont != nil {
				d = cont.depth + 1
			}
			if d > MaxStackDepth {
				return
			}
			alts := e.g.alts[el.arg]
			for _, p := range alts[1:] {
				e.expand(&frame{pos: p, depth: d, next: cont})
			}
			f = &frame{pos: alts[0], depth: d, next: cont}
		}
	}
}

func (e *expander) state() State {
	return State{stacks: e.stacks, accept: e.accept}
}

// Advance returns the state after byte c. The result is Dead when c
// cannot come next.
func (g *Grammar) Advance(s State, c byte) State {
	e := expander{g: g}
	for _, f := range s.stacks {
		if g.sets[g.elems[f.pos].arg].has(c) {
			e.expand(&frame{pos: f.pos + 1, depth: f.depth, next: f.next})
		}
	}
	return e.state()
}

// AdvanceBytes advances over every byte of b; it stops early once dead.
func (g *Grammar) AdvanceBytes(s State, b []byte) State {
	for _, c := range b {
		s = g.Advance(s, c)
		if s.Dead() {
			return s
		}
	}
	return s
}

// Next returns the set of bytes that can come next.
func (g *Grammar) next(s State) byteSet {
	var u byteSet
	for _, f := range s.stacks {
		u.union(&g.sets[g.elems[f.pos].arg])
	}
	return u
}

// key is a canonical text of s: equal keys mean equal states (the same
// stacks, in any order, and the same acceptance), so masks can be cached
// by it.
func (s State) key() string {
	parts := make([]string, len(s.stacks))
	var buf []byte
	for i, f := range s.stacks {
		buf = buf[:0]
		for ; f != nil; f = f.next {
			buf = binary.AppendUvarint(buf, uint64(f.pos))
		}
		parts[i] = string(buf)
	}
	slices.Sort(parts)
	parts = slices.Compact(parts)
	n := 1
	for _, p := range parts {
		n += len(p) + 1
	}
	out := make([]byte, 0, n)
	if s.accept {
		out = append(out, 1)
	} else {
		out = append(out, 0)
	}
	for _, p := range parts {
		out = binary.AppendUvarint(out, uint64(len(p)))
		out = append(out, p...)
	}
	return string(out)
}

// Match reports whether the grammar accepts all of b.
func (g *Grammar) Match(b []byte) bool {
	return g.AdvanceBytes(g.Start(), b).Accepting()
}

// Prefix reports whether b can be continued into a sentence (or is one).
func (g *Grammar) Prefix(b []byte) bool {
	return !g.AdvanceBytes(g.Start(), b).Dead()
}
