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
	arena  *arena // nil: frames come from the heap one by one
}

// arena hands out frames from chunks, for the many short-lived states of
// one mask computation (one allocation per chunk instead of per frame).
type arena struct {
	chunk []frame
}

func (a *arena) frame(pos, depth int32, next *frame) *frame {
	if len(a.chunk) == cap(a.chunk) {
		// Chunks grow from 64 frames to 4096: small walks stay small.
		a.chunk = make([]frame, 0, min(max(2*cap(a.chunk), 64), 4096))
	}
	a.chunk = append(a.chunk, frame{pos: pos, depth: depth, next: next})
	return &a.chunk[len(a.chunk)-1]
}

func (e *expander) frame(pos, depth int32, next *frame) *frame {
	if e.arena != nil {
		return e.arena.frame(pos, depth, next)
	}
	return &frame{pos: pos, depth: depth, next: next}
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
				cont = e.frame(f.pos+1, f.depth, f.next)
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
				e.expand(e.frame(p, d, cont))
			}
			f = e.frame(alts[0], d, cont)
		}
	}
}

func (e *expander) state() State {
	return State{stacks: e.stacks, accept: e.accept}
}

// Advance returns the state after byte c. The result is Dead when c
// cannot come next.
func (g *Grammar) Advance(s State, c byte) State {
	return g.advance(s, c, nil, nil)
}

// advance is Advance with frames from a (nil: the heap) and the result's
// stacks in buf's storage.
func (g *Grammar) advance(s State, c byte, a *arena, buf []*frame) State {
	e := expander{g: g, arena: a, stacks: buf[:0]}
	for _, f := range s.stacks {
		if g.sets[g.elems[f.pos].arg].has(c) {
			e.expand(e.frame(f.pos+1, f.depth, f.next))
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
