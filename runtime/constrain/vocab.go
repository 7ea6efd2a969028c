package constrain

import (
	"errors"
	"slices"
	"sync"
)

// Vocab is a model vocabulary prepared for masking: a trie of the tokens'
// byte strings. Build it once per model and share it; it is immutable and
// safe for concurrent use.
type Vocab struct {
	n     int     // vocabulary size
	words int     // uint64 words of a mask
	eog   []int32 // end-of-generation tokens: allowed exactly when the grammar accepts

	// The trie: node i has children edges[first[i]:first[i+1]] (sorted by
	// byte) and ends the tokens toks[tfirst[i]:tfirst[i+1]]. Node 0 is the
	// root (the empty string).
	first  []int32
	edges  []edge
	tfirst []int32
	toks   []int32
}

type edge struct {
	b    byte
	node int32
}

// NewVocab builds the trie of a vocabulary. pieces[i] is the text token i
// adds to the output as bytes (tokenizer.TokenBytes: byte-fallback tokens
// give their byte, multi-byte UTF-8 characters may be split over tokens);
// tokens with no bytes (control tokens) are never allowed, except those in
// eog, which are allowed exactly when the output is complete.
func NewVocab(pieces [][]byte, eog []int32) *Vocab {
	type tnode struct {
		kids map[byte]int32
		toks []int32
	}
	nodes := []tnode{{}}
	isEOG := map[int32]bool{}
	for _, t := range eog {
		isEOG[t] = true
	}
	for id, p := range pieces {
		// End-of-generation tokens are allowed by acceptance alone, even
		// if they have text.
		if len(p) == 0 || isEOG[int32(id)] {
			continue
		}
		cur := int32(0)
		for _, c := range p {
			nx, ok := nodes[cur].kids[c]
			if !ok {
				nx = int32(len(nodes))
				nodes = append(nodes, tnode{})
				if nodes[cur].kids == nil {
					nodes[cur].kids = map[byte]int32{}
				}
				nodes[cur].kids[c] = nx
			}
			cur = nx
		}
		nodes[cur].toks = append(nodes[cur].toks, int32(id))
	}
	v := &Vocab{n: len(pieces), words: (len(pieces) + 63) / 64}
	for _, t := range eog {
		if t >= 0 && int(t) < len(pieces) {
			v.eog = append(v.eog, t)
		}
	}
	v.first = make([]int32, 0, len(nodes)+1)
	v.tfirst = make([]int32, 0, len(nodes)+1)
	for _, nd := range nodes {
		v.first = append(v.first, int32(len(v.edges)))
		v.tfirst = append(v.tfirst, int32(len(v.toks)))
		keys := make([]byte, 0, len(nd.kids))
		for c := range nd.kids {
			keys = append(keys, c)
		}
		slices.Sort(keys)
		for _, c := range keys {
			v.edges = append(v.edges, edge{c, nd.kids[c]})
		}
		v.toks = append(v.toks, nd.toks...)
	}
	v.first = append(v.first, int32(len(v.edges)))
	v.tfirst = append(v.tfirst, int32(len(v.toks)))
	return v
}

// Size is the number of tokens.
func (v *Vocab) Size() int { return v.n }

// maxMasks bounds the masks one Constraint caches (each is Size/8 bytes:
// 4 KiB at 32,000 tokens).
const maxMasks = 2048

// Constraint is a Grammar over a Vocab: it computes token masks and caches
// them by grammar state, shared by every sequence that uses it. It is safe
// for concurrent use.
type Constraint struct {
	g *Grammar
	v *Vocab
	// tokBytes returns token id's bytes (for Accept).
	pieces [][]byte

	mu    sync.Mutex
	masks map[string][]uint64

	walkers sync.Pool // of *walker, for their scratch
}

// NewConstraint pairs a grammar with a vocabulary. pieces must be the
// slices v was built from.
func NewConstraint(g *Grammar, v *Vocab, pieces [][]byte) *Constraint {
	return &Constraint{g: g, v: v, pieces: pieces, masks: map[string][]uint64{}}
}

// Grammar returns the constraint's grammar.
func (c *Constraint) Grammar() *Grammar { return c.g }

// ErrNotAllowed is returned by Seq.Accept for a token the constraint does
// not allow at that point.
var ErrNotAllowed = errors.New("token not allowed by the constraint")

// Mask returns the tokens allowed after state s, as a bitset (bit t of
// word t/64 for token t). The result is shared and must not be modified.
func (c *Constraint) Mask(s State) []uint64 {
	key := s.key()
	c.mu.Lock()
	m, ok := c.masks[key]
	c.mu.Unlock()
	if ok {
		return m
	}
	m = c.computeMask(s)
	c.mu.Lock()
	if len(c.masks) >= maxMasks {
		// Drop an arbitrary half: cheap, and states that recur come back.
		i := 0
		for k := range c.masks {
			if i++; i > maxMasks/2 {
				break
			}
			delete(c.masks, k)
		}
	}
	c.masks[key] = m
	c.mu.Unlock()
	return m
}

// computeMask walks the token trie from s, advancing the grammar one byte
// per edge and cutting every subtree whose prefix is already dead.
func (c *Constraint) computeMask(s State) []uint64 {
	m := make([]uint64, c.v.words)
	if s.accept {
		for _, t := range c.v.eog {
			m[t>>6] |= 1 << (t & 63)
		}
	}
	w, _ := c.walkers.Get().(*walker)
	if w == nil {
		w = &walker{c: c}
	}
	// No frame of an earlier walk is referenced any more (masks hold no
	// states), so its last chunk is reused.
	w.m, w.arena.chunk = m, w.arena.chunk[:0]
	w.walk(0, s, 0)
	w.m = nil
	c.walkers.Put(w)
	return m
}

// walker is one mask computation: frames come from its arena, and the
// states at trie depth d keep their stacks in bufs[d] (a state is dead
// once its subtree is walked, so siblings reuse the storage).
type walker struct {
	c     *Constraint
	m     []uint64
	arena arena
	bufs  [][]*frame
}

func (w *walker) walk(node int32, s State, depth int) {
	c, v := w.c, w.c.v
	if depth == len(w.bufs) {
		w.bufs = append(w.bufs, make([]*frame, 0, 16))
	}
	next := c.g.next(s)
	for _, e := range v.edges[v.first[node]:v.first[node+1]] {
		if !next.has(e.b) {
			continue
		}
		s2 := c.g.advance(s, e.b, &w.arena, w.bufs[depth])
		w.bufs[depth] = s2.stacks[:0] // keep the grown storage
		if s2.Dead() {
			continue
		}
		for _, t := range v.toks[v.tfirst[e.node]:v.tfirst[e.node+1]] {
			w.m[t>>6] |= 1 << (t & 63)
		}
		if len(s2.stacks) > 0 {
			w.walk(e.node, s2, depth+1)
		}
	}
}

// Start returns a new sequence at the grammar's start.
func (c *Constraint) Start() *Seq {
	return &Seq{c: c, st: c.g.Start()}
}

// Seq is one sequence's progress through a Constraint. It is not safe for
// concurrent use (one sequence, one goroutine at a time).
type Seq struct {
	c    *Constraint
	st   State
	done bool // an end-of-generation token was accepted, or a token was refused
	only []uint64
}

// Allowed returns the tokens allowed next as a bitset (see
// Constraint.Mask). After an end-of-generation token, or once a refused
// token has broken the sequence, only end-of-generation tokens are
// allowed, so generation stops. The result must not be modified.
func (q *Seq) Allowed() []uint64 {
	if q.done {
		return q.eogOnly()
	}
	return q.c.Mask(q.st)
}

func (q *Seq) eogOnly() []uint64 {
	if q.only == nil {
		q.only = make([]uint64, q.c.v.words)
		for _, t := range q.c.v.eog {
			q.only[t>>6] |= 1 << (t & 63)
		}
	}
	return q.only
}

// Accept advances past tok. A token the constraint does not allow returns
// ErrNotAllowed and leaves the sequence able to end only.
func (q *Seq) Accept(tok int32) error {
	if q.done {
		return nil
	}
	if slices.Contains(q.c.v.eog, tok) {
		q.done = true
		if !q.st.accept {
			return ErrNotAllowed
		}
		return nil
	}
	if tok < 0 || int(tok) >= len(q.c.pieces) || len(q.c.pieces[tok]) == 0 {
		q.done = true
		return ErrNotAllowed
	}
	st := q.c.g.AdvanceBytes(q.st, q.c.pieces[tok])
	if st.Dead() {
		q.done = true
		return ErrNotAllowed
	}
	q.st = st
	return nil
}

// State returns the grammar state reached so far.
func (q *Seq) State() State { return q.st }

// Complete reports whether the output so far is a complete sentence.
func (q *Seq) Complete() bool { return q.st.accept }
