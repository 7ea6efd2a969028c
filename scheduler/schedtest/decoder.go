package schedtest

import "strings"

// Letters decodes token t as one letter, 'a'+t%26: every token is text,
// which makes stop strings easy to script.
type Letters struct{}

func (Letters) Add(id int32) string { return string(rune('a' + id%26)) }
func (Letters) Flush() string       { return "" }

// LettersOf is the text Letters makes of toks.
func LettersOf(toks []int32) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteString(Letters{}.Add(t))
	}
	return b.String()
}

// ByteOffset is the id of byte 0 in the byte vocabulary Bytes decodes: ids
// below it are special (the server and bench fakes use 1 for BOS, 2 for
// EOS), id ByteOffset+b is byte b.
const ByteOffset = 3

// Bytes decodes one token per byte, id ByteOffset+b as byte b; special ids
// decode to nothing.
type Bytes struct{}

func (Bytes) Add(id int32) string {
	if id < ByteOffset || id >= ByteOffset+256 {
		return ""
	}
	return string([]byte{byte(id - ByteOffset)})
}
func (Bytes) Flush() string { return "" }
