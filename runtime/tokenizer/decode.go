package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// computePiece is llama.cpp's token_to_piece with special=false: the bytes
// a token adds to the output text.
func (t *Tokenizer) computePiece(id int32) []byte {
	a, s := t.attrs[id], t.tokens[id]
	switch {
	case a&(attrControl|attrUnknown) != 0:
		return nil
	case a&attrUser != 0:
		return []byte(s)
	case a&attrNormal != 0:
		if t.kind == SPM || t.spmStyle {
			return []byte(strings.ReplaceAll(s, spmSpace, " "))
		}
		// Byte-level BPE: each character stands for one byte. A character
		// outside the alphabet (malformed vocabulary) is kept as its UTF-8
		// (llama.cpp writes an "[UNK_BYTE_0x..]" marker instead).
		var b []byte
		for _, r := range s {
			if c, ok := runeToByte[r]; ok {
				b = append(b, c)
			} else {
				b = utf8.AppendRune(b, r)
			}
		}
		return b
	case a&attrByte != 0 && (t.kind == SPM || t.spmStyle):
		if c, ok := parseByteToken(s); ok {
			return []byte{c}
		}
	}
	return nil
}

// parseByteToken parses "<0xAB>".
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	var v byte
	for _, c := range []byte(s[3:5]) {
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | (c - '0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

// TokenBytes returns the bytes id contributes to the output text: SPM "▁"
// becomes a space and "<0xAB>" the byte 0xAB; byte-level BPE characters map
// back to their bytes; user-defined tokens give their text; control, unknown
// and unused tokens give nothing. The bytes of one token need not be valid
// UTF-8 (a character may span several tokens). The result must not be
// modified.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if !t.valid(id) {
		return nil
	}
	return t.pieces[id]
}

// Decode returns the text of a whole sequence: the tokens' bytes
// concatenated, with each invalid or truncated UTF-8 sequence replaced by
// U+FFFD (exactly as a StreamDecoder would). For SPM vocabularies that add a
// space prefix, the leading space of the first token that produces text is
// removed (leading control tokens such as BOS are skipped over), so
// Decode(Encode(s, ...)) == s for text that the vocabulary can represent.
//
// Unlike llama.cpp's llama_detokenize, Decode never applies the
// "clean_up_tokenization_spaces" rewrites (" ," -> ","...) of some BPE
// models: it is the exact concatenation that streaming produces.
func (t *Tokenizer) Decode(ids []int32) string {
	var raw []byte
	strip := t.kind == SPM && t.addSpacePrefix
	for _, id := range ids {
		p := t.TokenBytes(id)
		if strip && len(p) > 0 {
			strip = false
			if p[0] == ' ' {
				p = p[1:]
			}
		}
		raw = append(raw, p...)
	}
	var sb strings.Builder
	rest := appendValid(&sb, raw)
	flushInvalid(&sb, rest)
	return sb.String()
}

// StreamDecoder turns generated tokens into text as they arrive. Each Add
// returns the text completed so far that was not returned before, always
// valid UTF-8: the bytes of a character split across tokens are held back
// until it is complete, and bytes that can never form a character become
// U+FFFD. Concatenating every Add and the final Flush gives the same text
// whatever the tokens, and equals the concatenation of their TokenBytes
// with invalid sequences replaced.
//
// No leading space is removed: generated text continues the prompt, so an
// SPM token "▁Hello" yields " Hello", as llama-server and llama-cli print it
// (common_token_to_piece). Use Decode for a whole sequence.
//
// A StreamDecoder is not safe for concurrent use.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte // an incomplete UTF-8 prefix, at most 3 bytes
	sb      strings.Builder
}

// NewStreamDecoder returns a decoder for one generated sequence.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder {
	return &StreamDecoder{t: t}
}

// Add appends the text of id and returns what became complete.
func (d *StreamDecoder) Add(id int32) string {
	p := d.t.TokenBytes(id)
	if len(p) == 0 && len(d.pending) == 0 {
		return ""
	}
	buf := append(d.pending, p...)
	d.sb.Reset()
	rest := appendValid(&d.sb, buf)
	d.pending = append(d.pending[:0:0], rest...)
	return d.sb.String()
}

// Flush returns the held bytes (as U+FFFD, since they never completed a
// character) and resets the decoder.
func (d *StreamDecoder) Flush() string {
	if len(d.pending) == 0 {
		return ""
	}
	d.sb.Reset()
	flushInvalid(&d.sb, d.pending)
	d.pending = d.pending[:0]
	return d.sb.String()
}

// appendValid writes the decodable prefix of b to sb (invalid bytes as
// U+FFFD) and returns the tail that may still become a character.
func appendValid(sb *strings.Builder, b []byte) []byte {
	for len(b) > 0 {
		if !utf8.FullRune(b) {
			return b
		}
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.Write(b[:size])
		}
		b = b[size:]
	}
	return nil
}

// flushInvalid writes an incomplete tail as one U+FFFD per byte.
func flushInvalid(sb *strings.Builder, b []byte) {
	for range b {
		sb.WriteRune(utf8.RuneError)
	}
}
