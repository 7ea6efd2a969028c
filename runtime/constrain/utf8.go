package constrain

import (
	"unicode/utf8"
)

// byteRange is an inclusive range of bytes.
type byteRange struct{ lo, hi byte }

// utf8Seqs appends to out the byte-range sequences whose concatenations
// are exactly the UTF-8 encodings of the code points in [lo, hi]
// (surrogates excluded). Each sequence has one range per byte of the
// encoding.
func utf8Seqs(out [][]byteRange, lo, hi rune) [][]byteRange {
	if hi > utf8.MaxRune {
		hi = utf8.MaxRune
	}
	if lo > hi {
		return out
	}
	// Surrogates are not code points UTF-8 can carry.
	if lo < 0xD800 && hi >= 0xD800 {
		out = utf8Seqs(out, lo, 0xD7FF)
		return utf8Seqs(out, 0xE000, hi)
	}
	if lo >= 0xD800 && lo <= 0xDFFF {
		return utf8Seqs(out, 0xE000, hi)
	}
	// One encoding length at a time.
	for _, edge := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= edge && hi > edge {
			out = utf8Seqs(out, lo, edge)
			return utf8Seqs(out, edge+1, hi)
		}
	}
	if hi <= 0x7F {
		return append(out, []byteRange{{byte(lo), byte(hi)}})
	}
	// Split until every continuation byte spans a contiguous range
	// independently of the bytes before it.
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				out = utf8Seqs(out, lo, lo|m)
				return utf8Seqs(out, (lo|m)+1, hi)
			}
			if hi&m != m {
				out = utf8Seqs(out, lo, hi&^m-1)
				return utf8Seqs(out, hi&^m, hi)
			}
		}
	}
	var a, b [4]byte
	utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(b[:], hi)
	seq := make([]byteRange, n)
	for i := range n {
		seq[i] = byteRange{a[i], b[i]}
	}
	return append(out, seq)
}

// runeClass returns a sequence matching one code point in the union of
// the inclusive ranges (pairs lo, hi). ASCII parts share one byte set.
func (b *builder) runeClass(ranges []rune) []item {
	var ascii byteSet
	var multi [][]byteRange
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		if lo <= 0x7F {
			ascii.addRange(byte(lo), byte(min(hi, 0x7F)))
			lo = 0x80
		}
		multi = utf8Seqs(multi, lo, hi)
	}
	var alts [][]item
	if !ascii.empty() {
		alts = append(alts, []item{byteItem(ascii)})
	}
	for _, seq := range multi {
		s := make([]item, len(seq))
		for i, r := range seq {
			var set byteSet
			set.addRange(r.lo, r.hi)
			s[i] = byteItem(set)
		}
		alts = append(alts, s)
	}
	if len(alts) == 0 {
		// An empty class matches nothing: a byte set with no members.
		return []item{byteItem(byteSet{})}
	}
	return b.alt(alts...)
}

// negate returns the complement of sorted, non-overlapping rune ranges
// within [0, MaxRune].
func negate(ranges []rune) []rune {
	var out []rune
	next := rune(0)
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i] > next {
			out = append(out, next, ranges[i]-1)
		}
		next = max(next, ranges[i+1]+1)
	}
	if next <= utf8.MaxRune {
		out = append(out, next, utf8.MaxRune)
	}
	return out
}
