package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Character classes used by the pre-tokenizers. A rune has at most one of the
// category bits (letter, number, punctuation, symbol, mark) and, separately,
// may be whitespace. Invalid UTF-8 bytes get no bit at all: they behave like
// any other "not a letter, not a number, not a space" character, which is
// what the negated classes of the reference regexes ([^\s\p{L}\p{N}]) match.
const (
	clsLetter uint8 = 1 << iota // \p{L}
	clsNumber                   // \p{N}
	clsPunct                    // \p{P}
	clsSymbol                   // \p{S}
	clsMark                     // \p{M}
	clsSpace                    // \s: Unicode White_Space
)

// asciiClass caches classOf for runes below 0x80.
var asciiClass = func() (t [128]uint8) {
	for r := rune(0); r < 128; r++ {
		t[r] = classOfSlow(r)
	}
	return t
}()

func classOfSlow(r rune) uint8 {
	var c uint8
	switch {
	case unicode.IsLetter(r):
		c = clsLetter
	case unicode.IsNumber(r):
		c = clsNumber
	case unicode.IsPunct(r):
		c = clsPunct
	case unicode.IsSymbol(r):
		c = clsSymbol
	case unicode.IsMark(r):
		c = clsMark
	}
	if unicode.IsSpace(r) {
		c |= clsSpace
	}
	return c
}

// classOf returns the class bits of r (0 for invalid bytes, encoded as -1).
func classOf(r rune) uint8 {
	if r < 0 {
		return 0
	}
	if r < 128 {
		return asciiClass[r]
	}
	return classOfSlow(r)
}

// runeText is a text fragment decoded into runes for the pre-tokenizers.
// Bytes that are not valid UTF-8 become single "runes" with value -1, so
// every byte of the input lands in exactly one piece and byte-level BPE
// stays lossless.
type runeText struct {
	r   []rune  // rune value, -1 for an invalid byte
	cls []uint8 // classOf(r)
	off []int   // byte offset of rune i; off[len(r)] == len(text)
}

func newRuneText(text string) *runeText {
	t := &runeText{
		r:   make([]rune, 0, len(text)),
		cls: make([]uint8, 0, len(text)),
		off: make([]int, 0, len(text)+1),
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size <= 1 {
			r, size = -1, 1
		}
		t.r = append(t.r, r)
		t.cls = append(t.cls, classOf(r))
		t.off = append(t.off, i)
		i += size
	}
	t.off = append(t.off, len(text))
	return t
}

func (t *runeText) is(i int, c uint8) bool { return t.cls[i]&c != 0 }

// regexRune is the rune as the reference implementation's std::wregex sees
// it for explicit character ranges: non-ASCII whitespace is replaced by
// U+000B so that \s matches it, which also keeps it out of every range.
func (t *runeText) regexRune(i int) rune {
	r := t.r[i]
	if r >= 0x80 && t.cls[i]&clsSpace != 0 {
		return 0x0B
	}
	return r
}

// The byte-level BPE alphabet (GPT-2's bytes_to_unicode): printable Latin-1
// bytes map to themselves, the other 68 bytes to U+0100 onwards, in order.
var (
	byteToRune [256]rune
	runeToByte = map[rune]byte{}
)

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = rune(256 + n)
			n++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// rangeClass is a character class given as sorted-or-not ranges.
type rangeClass [][2]rune

// parseClass parses the inside of a regex bracket expression made only of
// literal characters and X-Y ranges (no escapes), as the DeepSeek rules are.
func parseClass(s string) rangeClass {
	rs := []rune(s)
	var c rangeClass
	for i := 0; i < len(rs); i++ {
		if i+2 < len(rs) && rs[i+1] == '-' {
			c = append(c, [2]rune{rs[i], rs[i+2]})
			i += 2
			continue
		}
		c = append(c, [2]rune{rs[i], rs[i]})
	}
	return c
}

func (c rangeClass) has(r rune) bool {
	for _, x := range c {
		if x[0] <= r && r <= x[1] {
			return true
		}
	}
	return false
}
