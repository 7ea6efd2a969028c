package tokenizer

import "strings"

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
// tokens, byte-level BPE encodes the raw bytes.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	out := make([]int32, 0, len(text)/3+2)
	frags := t.partition(text, parseSpecial)
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
	start, n   int // byte range in the text; n == 0 once merged away
	prev, next int // neighbours, -1 at the ends
}

type spmBigram struct {
	left, right int
	score       float32
	size        int
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
		idx := len(syms)
		next := idx + 1
		if off+n == len(text) {
			next = -1
		}
		syms = append(syms, symbol{start: off, n: n, prev: idx - 1, next: next})
		off += n
	}
	h := heap[spmBigram]{less: func(a, b spmBigram) bool {
		if a.score != b.score {
			return a.score > b.score
		}
		return a.left < b.left
	}}
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		s := text[syms[l].start : syms[l].start+syms[l].n+syms[r].n]
		id, ok := t.ids[string(s)]
		if !ok {
			return
		}
		h.push(spmBigram{left: l, right: r, score: t.scores[id], size: len(s)})
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for h.len() > 0 {
		b := h.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		try(l.prev, b.left)
		try(b.left, l.next)
	}
	for i := 0; i != -1; i = syms[i].next {
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

type bpeBigram struct {
	left, right int
	rank        int32
	size        int
}

// bpeState holds buffers reused across the words of one Encode call.
type bpeState struct {
	word []byte
	syms []symbol
	h    heap[bpeBigram]
}

// encodeBPE pre-tokenizes one raw fragment and runs byte-level BPE on each
// word: map its bytes to the GPT-2 byte alphabet, start from those
// characters, repeatedly merge the adjacent pair with the lowest merge rank
// (leftmost on ties), then emit each symbol's token (or, when a symbol is
// not in the vocabulary, the tokens of its single bytes that are).
func (t *Tokenizer) encodeBPE(s *bpeState, text string, out []int32) []int32 {
	rt := newRuneText(text)
	s.h.less = func(a, b bpeBigram) bool {
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		return a.left < b.left
	}
	for _, sp := range t.rules.split(rt) {
		raw := text[rt.off[sp.start]:rt.off[sp.end]]
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
	if t.ignoreMerges {
		if id, ok := t.ids[string(w)]; ok {
			return append(out, id)
		}
	}
	syms := s.syms[:0]
	for off := 0; off < len(w); {
		n := min(utf8Len(w[off]), len(w)-off)
		idx := len(syms)
		next := idx + 1
		if off+n == len(w) {
			next = -1
		}
		syms = append(syms, symbol{start: off, n: n, prev: idx - 1, next: next})
		off += n
	}
	s.syms = syms
	h := &s.h
	h.items = h.items[:0]
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		pair := w[syms[l].start : syms[l].start+syms[l].n+syms[r].n]
		for _, m := range t.merges[string(pair)] {
			if int(m.leftLen) == syms[l].n {
				h.push(bpeBigram{left: l, right: r, rank: m.rank, size: len(pair)})
				return
			}
		}
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for h.len() > 0 {
		b := h.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		try(l.prev, b.left)
		try(b.left, l.next)
	}
	for i := 0; i != -1; i = syms[i].next {
		sym := w[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[string(sym)]; ok {
			out = append(out, id)
			continue
		}
		for k := range sym {
			if id, ok := t.ids[string(sym[k:k+1])]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// heap is a binary min-heap under less.
type heap[T any] struct {
	items []T
	less  func(a, b T) bool
}

func (h *heap[T]) len() int { return len(h.items) }

func (h *heap[T]) push(x T) {
	h.items = append(h.items, x)
	i := len(h.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.items[i], h.items[p]) {
			break
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *heap[T]) pop() T {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items = h.items[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= last {
			break
		}
		m := l
		if r := l + 1; r < last && h.less(h.items[r], h.items[l]) {
			m = r
		}
		if !h.less(h.items[m], h.items[i]) {
			break
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
	return top
}
