package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzVocabs load quickly enough in every fuzz worker: one SentencePiece
// vocabulary, two byte-level BPE ones with different pre-tokenizers (gpt-2;
// deepseek-coder, which also has user-defined tokens) and Gemma 4's
// SentencePiece-style BPE.
var fuzzVocabs = []string{"models/stories260K.gguf", "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-deepseek-coder.gguf",
	"vocab/ggml-vocab-gemma-4.gguf"}

// FuzzEncode: any input encodes without panicking to in-range ids; where the
// tokenizer is lossless (valid UTF-8, no special token parsed or produced)
// Decode gives the input back (SPM: unless the text contains "▁", which
// decodes as a space); streaming the ids gives valid UTF-8 equal to
// the concatenated token bytes.
//
// Seed corpus: testdata/fuzz/FuzzEncode. Run with
// go test -run '^$' -fuzz FuzzEncode -fuzztime 30s ./runtime/tokenizer
func FuzzEncode(f *testing.F) {
	toks := make([]*Tokenizer, len(fuzzVocabs))
	for i, rel := range fuzzVocabs {
		toks[i] = load(f, rel)
	}
	f.Add("Once upon a time", false)
	f.Fuzz(func(t *testing.T, text string, parseSpecial bool) {
		for _, tok := range toks {
			for _, addSpecial := range []bool{false, true} {
				ids := tok.Encode(text, addSpecial, parseSpecial)
				special := false
				for _, id := range ids {
					if id < 0 || int(id) >= tok.VocabSize() {
						t.Fatalf("Encode(%q) id %d out of range [0,%d)", text, id, tok.VocabSize())
					}
					if tok.attrs[id]&(attrControl|attrUnknown) != 0 {
						special = true
					}
				}
				if text != "" && len(ids) == 0 {
					t.Fatalf("Encode(%q) gave no tokens", text)
				}
				// SentencePiece cannot tell a "▁" in the text from an escaped space.
				lossy := (tok.kind == SPM || tok.spmStyle) && strings.Contains(text, spmSpace)
				if !special && !lossy && utf8.ValidString(text) {
					if got := tok.Decode(ids); got != text {
						t.Fatalf("%s: Decode(Encode(%q)) = %q", tok.kind, text, got)
					}
				}
				d := tok.NewStreamDecoder()
				var sb strings.Builder
				for _, id := range ids {
					s := d.Add(id)
					if !utf8.ValidString(s) {
						t.Fatalf("stream chunk %q is not valid UTF-8", s)
					}
					sb.WriteString(s)
				}
				sb.WriteString(d.Flush())
				if want := rawConcat(tok, ids); sb.String() != want {
					t.Fatalf("stream = %q, want %q", sb.String(), want)
				}
			}
		}
	})
}
