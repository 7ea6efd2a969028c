package tokenizer

import (
	"math"
	"strings"
)

// fragment is a piece of the input: raw text, or a special token found in it.
type fragment struct {
	text string // raw text (when id < 0)
	id   int32  // special token id, or -1
}

// Encode tokenizes text. addSpecial adds BOS and/or EOS as the model asks
// (AddBOS, AddEOS). parseSpecial recognises the texts of control and unknown
// tokens (e.g. "<s>", "<|eot_id|>") in text and emits their ids;
// user-defined tokens are recognised either way, as in llama.cpp.
//
// Any input is accepted, including invalid UTF-8: SPM falls back to byte
// tokens, byte-level BPE encodes the raw bytes, Gemma 4's BPE falls back to
// byte tokens for them.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	return t.encodeFragments(t.partition(text, parseSpecial), len(text), addSpecial)
}

// Segment is one piece of a text given to EncodeSegments.
type Segment struct {
	Text string // the text
	// ParseSpecial recognises control-token text in Text, as Encode's
	// parseSpecial does.
	ParseSpecial bool
}

// EncodeSegments tokenizes the concatenation of segs, recognising the texts
// of control tokens only in the segments that ask for it (a chat template's
// own markup) and never in the others (message contents). Text on either
// side of a segment boundary is tokenized as one run, so when no segment
// holds control-token text the result is Encode of the whole text with
// parseSpecial true.
func (t *Tokenizer) EncodeSegments(segs []Segment, addSpecial bool) []int32 {
	var (
		frags []fragment
		run   strings.Builder // raw text since the last special token
		n     int
	)
	flush := func() {
		if run.Len() > 0 {
			frags = append(frags, fragment{text: run.String(), id: -1})
			run = strings.Builder{}
		}
	}
	for _, sg := range segs {
		n += len(sg.Text)
		for _, fr := range t.partition(sg.Text, sg.ParseSpecial) {
			if fr.id < 0 {
				run.WriteString(fr.text) // coalesce: one run of raw text
				continue
			}
			flush()
			frags = append(frags, fr)
		}
	}
	flush()
	return t.encodeFragments(frags, n, addSpecial)
}

// encodeFragments tokenizes the fragments of a text of n bytes.
func (t *Tokenizer) encodeFragments(frags []fragment, n int, addSpecial bool) []int32 {
	out := make([]int32, 0, n/3+2)
	if addSpecial && t.AddBOS() {
		out = append(out, t.bos)
	}
	switch t.kind {
	case SPM:
		prevSpecial := true // the first text fragment gets the space prefix
		var buf []byte
		for _, fr := range frags {
			if fr.id >= 0 {
				out = append(out, fr.id)
				prevSpecial = true
				continue
			}
			buf = buf[:0]
			if t.addSpacePrefix && prevSpecial {
				buf = append(buf, spmSpace...)
			}
			buf = appendEscaped(buf, fr.text)
			out = t.encodeSPM(buf, out)
			prevSpecial = false
		}
	case BPE:
		var s bpeState
		for _, fr := range frags {
			if fr.id >= 0 {
				out = append(out, fr.id)
				continue
			}
			out = t.encodeBPE(&s, fr.text, out)
		}
	}
	if addSpecial && t.AddEOS() {
		out = append(out, t.eos)
	}
	return out
}

// partition splits text around the special tokens it contains, as
// llama.cpp's tokenizer_st_partition does: each special token in turn
// (longest text first) cuts every raw fragment at all its non-overlapping
// occurrences, left to right. With parseSpecial false only user-defined
// tokens are considered. A token with the lstrip (rstrip) attribute eats the
// ASCII whitespace before (after) it.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	if text == "" {
		return nil
	}
	frags := []fragment{{text: text, id: -1}}
	present := t.specialsIn(text, parseSpecial)
	if len(present) == 0 {
		return frags
	}
	var next []fragment
	for _, id := range t.special { // keeps the longest-first order
		if !present[id] {
			continue
		}
		tok, a := t.tokens[id], t.attrs[id]
		next = next[:0]
		for _, fr := range frags {
			if fr.id >= 0 {
				next = append(next, fr)
				continue
			}
			s := fr.text
			for {
				k := strings.Index(s, tok)
				if k < 0 {
					break
				}
				left := s[:k]
				if a&attrLStrip != 0 {
					left = strings.TrimRightFunc(left, isCSpace)
				}
				if left != "" {
					next = append(next, fragment{text: left, id: -1})
				}
				next = append(next, fragment{id: id})
				s = s[k+len(tok):]
				if a&attrRStrip != 0 {
					s = strings.TrimLeftFunc(s, isCSpace)
				}
			}
			if s != "" {
				next = append(next, fragment{text: s, id: -1})
			}
		}
		frags, next = next, frags
	}
	return frags
}

// isCSpace is C's isspace in the "C" locale.
func isCSpace(r rune) bool {
	return r == ' ' || (r >= '\t' && r <= '\r')
}

// specialsIn returns the special tokens whose text occurs in text (nil when
// none), found with one pass of the trie.
func (t *Tokenizer) specialsIn(text string, parseSpecial bool) map[int32]bool {
	if t.trie.next == nil {
		return nil
	}
	var found map[int32]bool
	for i := 0; i < len(text); i++ {
		n := t.trie.next[text[i]]
		for j := i + 1; n != nil; j++ {
			if n.end && (parseSpecial || t.attrs[n.id]&(attrControl|attrUnknown) == 0) {
				if found == nil {
					found = map[int32]bool{}
				}
				found[n.id] = true
			}
			if j >= len(text) || n.next == nil {
				break
			}
			n = n.next[text[j]]
		}
	}
	return found
}

// --- SentencePiece ---------------------------------------------------------

const spmSpace = "\u2581" // ▁, SentencePiece's visible space

func appendEscaped(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			buf = append(buf, spmSpace...)
		} else {
			buf = append(buf, s[i])
		}
	}
	return buf
}

// utf8Len is the sequence length announced by a UTF-8 lead byte (1 for
// continuation and invalid bytes), as llama.cpp's unicode_len_utf8.
func utf8Len(b byte) int {
	switch {
	case b < 0xC0:
		return 1
	case b < 0xE0:
		return 2
	case b < 0xF0:
		return 3
	}
	return 4
}

type symbol struct {
	start, n   int32 // byte range in the text; n == 0 once merged away
	prev, next int32 // neighbours, -1 at the ends
}

// encodeSPM runs SentencePiece BPE on one escaped fragment: start from UTF-8
// characters, repeatedly merge the adjacent pair whose concatenation is the
// vocabulary token with the highest score (leftmost on ties), then emit each
// symbol's token, or its bytes' <0xXX> tokens when it is not in the
// vocabulary.
func (t *Tokenizer) encodeSPM(text []byte, out []int32) []int32 {
	if len(text) == 0 {
		return out
	}
	syms := make([]symbol, 0, len(text))
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		idx := int32(len(syms))
		next := idx + 1
		if off+n == len(text) {
			next = -1
		}
		syms = append(syms, symbol{start: int32(off), n: int32(n), prev: idx - 1, next: next})
		off += n
	}
	var h bigramHeap
	try := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		s := text[syms[l].start : syms[l].start+syms[l].n+syms[r].n]
		id, ok := t.ids[string(s)]
		if !ok {
			return
		}
		h.push(bigram{key: spmKey(t.scores[id], l), right: r, size: int32(len(s))})
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		try(i-1, i)
	}
	for len(h) > 0 {
		b := h.pop()
		bl := b.left()
		l, r := &syms[bl], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = bl
		}
		try(l.prev, bl)
		try(bl, l.next)
	}
	for i := int32(0); i != -1; i = syms[i].next {
		s := text[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[string(s)]; ok {
			out = append(out, id)
			continue
		}
		for _, c := range s {
			if id := t.byteTokens[c]; id >= 0 {
				out = append(out, id)
			} else if t.unk >= 0 {
				out = append(out, t.unk)
			}
		}
	}
	return out
}

// --- byte-level BPE --------------------------------------------------------

// bpeState holds buffers reused across the words of one Encode call.
type bpeState struct {
	word []byte
	syms []symbol
	h    bigramHeap
}

// encodeBPE pre-tokenizes one raw fragment and runs byte-level BPE on each
// word: map its bytes to the GPT-2 byte alphabet (SentencePiece-style BPE
// instead turns spaces into "▁" before the split and keeps the UTF-8), start
// from those characters, repeatedly merge the adjacent pair with the lowest merge rank
// (leftmost on ties), then emit each symbol's token (or, when a symbol is
// not in the vocabulary, the tokens of its single bytes that are).
func (t *Tokenizer) encodeBPE(s *bpeState, text string, out []int32) []int32 {
	if t.spmStyle {
		text = strings.ReplaceAll(text, " ", spmSpace)
	}
	rt := newRuneText(text)
	for _, sp := range t.rules.split(rt) {
		raw := text[rt.off[sp.start]:rt.off[sp.end]]
		if t.spmStyle {
			out = t.bpeWord(s, []byte(raw), out)
			continue
		}
		w := s.word[:0]
		for i := 0; i < len(raw); i++ {
			r := byteToRune[raw[i]]
			if r < 0x80 {
				w = append(w, byte(r))
			} else { // all alphabet runes are below U+0800: two bytes
				w = append(w, byte(0xC0|r>>6), byte(0x80|r&0x3F))
			}
		}
		s.word = w
		out = t.bpeWord(s, w, out)
	}
	return out
}

func (t *Tokenizer) bpeWord(s *bpeState, w []byte, out []int32) []int32 {
	if t.ignoreMerges || (t.spmStyle && onlyNewlines(w)) {
		if id, ok := t.ids[string(w)]; ok {
			return append(out, id)
		}
	}
	syms := s.syms[:0]
	for off := 0; off < len(w); {
		n := min(utf8Len(w[off]), len(w)-off)
		idx := int32(len(syms))
		next := idx + 1
		if off+n == len(w) {
			next = -1
		}
		syms = append(syms, symbol{start: int32(off), n: int32(n), prev: idx - 1, next: next})
		off += n
	}
	s.syms = syms
	h := &s.h
	*h = (*h)[:0]
	try := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		pair := w[syms[l].start : syms[l].start+syms[l].n+syms[r].n]
		for _, m := range t.merges[string(pair)] {
			if m.leftLen == syms[l].n {
				h.push(bigram{key: bpeKey(m.rank, l), right: r, size: int32(len(pair))})
				return
			}
		}
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		try(i-1, i)
	}
	for len(*h) > 0 {
		b := h.pop()
		bl := b.left()
		l, r := &syms[bl], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = bl
		}
		try(l.prev, bl)
		try(bl, l.next)
	}
	for i := int32(0); i != -1; i = syms[i].next {
		sym := w[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[string(sym)]; ok {
			out = append(out, id)
			continue
		}
		for k := range sym {
			if t.spmStyle {
				if id := t.byteTokens[sym[k]]; id >= 0 {
					out = append(out, id)
				}
			} else if id, ok := t.ids[string(sym[k:k+1])]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

func onlyNewlines(w []byte) bool {
	for _, c := range w {
		if c != '\n' {
			return false
		}
	}
	return true
}

// bigram is a candidate merge of the symbols left and right = the next
// symbol of left at the time it was queued. key orders the queue: the high
// 32 bits are the priority (smaller first), the low 32 bits are left, so
// ties go to the leftmost pair as in llama.cpp.
type bigram struct {
	key   uint64
	right int32
	size  int32 // byte length of the pair when queued; stale if it changed
}

func (b bigram) left() int32 { return int32(uint32(b.key)) }

// spmKey orders by descending score: the bits of -score made sortable.
func spmKey(score float32, left int32) uint64 {
	if score == 0 {
		score = 0 // -0 ties with +0, as float comparison says
	}
	u := math.Float32bits(score)
	if u&0x80000000 != 0 {
		u = ^u
	} else {
		u |= 0x80000000
	}
	return uint64(^u)<<32 | uint64(uint32(left))
}

func bpeKey(rank, left int32) uint64 { return uint64(uint32(rank))<<32 | uint64(uint32(left)) }

// bigramHeap is a binary min-heap of bigrams by key.
type bigramHeap []bigram

func (h *bigramHeap) push(x bigram) {
	*h = append(*h, x)
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if a[p].key <= x.key {
			break
		}
		a[i] = a[p]
		i = p
	}
	a[i] = x
}

func (h *bigramHeap) pop() bigram {
	a := *h
	top := a[0]
	last := len(a) - 1
	x := a[last]
	a = a[:last]
	*h = a
	if last == 0 {
		return top
	}
	i := 0
	for {
		l := 2*i + 1
		if l >= last {
			break
		}
		m := l
		if r := l + 1; r < last && a[r].key < a[l].key {
			m = r
		}
		if x.key <= a[m].key {
			break
		}
		a[i] = a[m]
		i = m
	}
	a[i] = x
	return top
}

// ControlTextIn reports the first control (or unknown) token whose text
// occurs in text: text that becomes that token when it is tokenized with
// special tokens recognised (parseSpecial), and only then. Text a client
// sends that reaches a prompt as template markup (a tool call's id or
// arguments, a tool definition) must hold none, or the client writes the
// conversation's structure.
func (t *Tokenizer) ControlTextIn(text string) (string, bool) {
	found := t.specialsIn(text, true)
	best, at := "", -1
	for id := range found {
		if t.attrs[id]&(attrControl|attrUnknown) == 0 {
			continue
		}
		p := t.tokens[id]
		if i := strings.Index(text, p); i >= 0 && (at < 0 || i < at || (i == at && len(p) > len(best))) {
			best, at = p, i
		}
	}
	return best, at >= 0
}
