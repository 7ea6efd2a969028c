package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/internal/shareddata"
)

// streamAll feeds ids one by one to a new StreamDecoder, checks every chunk
// is valid UTF-8, and returns the concatenated text.
func streamAll(t *testing.T, tok *Tokenizer, ids []int32) string {
	t.Helper()
	d := tok.NewStreamDecoder()
	var sb strings.Builder
	for i, id := range ids {
		s := d.Add(id)
		if !utf8.ValidString(s) {
			t.Fatalf("Add(ids[%d]=%d) returned invalid UTF-8 %q", i, id, s)
		}
		sb.WriteString(s)
	}
	s := d.Flush()
	if !utf8.ValidString(s) {
		t.Fatalf("Flush returned invalid UTF-8 %q", s)
	}
	sb.WriteString(s)
	return sb.String()
}

// rawConcat is the reference for streaming: TokenBytes concatenated, with
// invalid UTF-8 replaced as documented (one U+FFFD per undecodable byte).
func rawConcat(tok *Tokenizer, ids []int32) string {
	var b []byte
	for _, id := range ids {
		b = append(b, tok.TokenBytes(id)...)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	return sb.String()
}

func TestStreamMatchesDecode(t *testing.T) {
	for _, name := range shareddata.VocabNames {
		t.Run(name, func(t *testing.T) {
			tok := load(t, "vocab/ggml-vocab-"+name+".gguf")
			for _, v := range shareddata.ReadVocabVectors(t, name) {
				ids := tok.Encode(v.Text, true, false)
				got := streamAll(t, tok, ids)
				want := tok.Decode(ids)
				if tok.Kind() == SPM && v.Text != "" {
					want = " " + want // the stream keeps the space prefix
				}
				if got != want {
					t.Errorf("stream of Encode(%q) = %q, want %q", v.Text, got, want)
				}
			}
		})
	}
}

// TestStreamRandomIDs is the property test: for random token sequences
// (many of them SPM byte tokens that form broken UTF-8), streaming gives the
// same text as decoding the whole and never emits invalid UTF-8.
func TestStreamRandomIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, rel := range []string{"models/stories260K.gguf", "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-deepseek-coder.gguf"} {
		tok := load(t, rel)
		for range 300 {
			ids := make([]int32, rng.IntN(20))
			for i := range ids {
				if tok.Kind() == SPM && rng.IntN(2) == 0 {
					ids[i] = 3 + rng.Int32N(256) // a byte token
				} else {
					ids[i] = rng.Int32N(int32(tok.VocabSize()))
				}
			}
			got := streamAll(t, tok, ids)
			if want := rawConcat(tok, ids); got != want {
				t.Fatalf("%s: stream(%v) = %q, want %q", rel, ids, got, want)
			}
			dec := tok.Decode(ids)
			if !utf8.ValidString(dec) {
				t.Fatalf("%s: Decode(%v) = %q is not valid UTF-8", rel, ids, dec)
			}
		}
	}
}

func TestStreamDecoderChunks(t *testing.T) {
	tok := load(t, "models/stories260K.gguf")
	b := func(c byte) int32 { return tok.byteTokens[c] }
	for _, tc := range []struct {
		name  string
		ids   []int32
		want  []string // what each Add returns, then Flush
		whole string
	}{
		{"emoji by bytes", []int32{b(0xF0), b(0x9F), b(0x98), b(0x80)}, []string{"", "", "", "😀", ""}, "😀"},
		{"space kept", []int32{410, 346, 306, 414}, []string{" ", " He", "ll", "o", ""}, " Hello"},
		{"bos renders nothing", []int32{1, 291}, []string{"", " The", ""}, "The"},
		{"invalid byte", []int32{b(0xFF), 261}, []string{"\uFFFD", " a", ""}, "\uFFFD a"},
		{"broken sequence", []int32{b(0xE2), b(0x82), 261}, []string{"", "", "\uFFFD\uFFFD a", ""}, "\uFFFD\uFFFD a"},
		{"truncated at end", []int32{261, b(0xE2), b(0x82)}, []string{" a", "", "", "\uFFFD\uFFFD"}, "a\uFFFD\uFFFD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tok.NewStreamDecoder()
			var got []string
			for _, id := range tc.ids {
				got = append(got, d.Add(id))
			}
			got = append(got, d.Flush())
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
			if whole := tok.Decode(tc.ids); whole != tc.whole {
				t.Errorf("Decode = %q, want %q", whole, tc.whole)
			}
		})
	}
}

func TestTokenBytes(t *testing.T) {
	spm := load(t, "models/stories260K.gguf")
	gpt2 := load(t, "vocab/ggml-vocab-gpt-2.gguf")
	for _, tc := range []struct {
		tok  *Tokenizer
		id   int32
		want string
	}{
		{spm, 1, ""},        // <s>: control
		{spm, 0, ""},        // <unk>: unknown
		{spm, 13, "\n"},     // <0x0A>
		{spm, 410, " "},     // ▁
		{spm, 403, " Once"}, // ▁Once
		{spm, -1, ""},
		{spm, 512, ""},
		{gpt2, 50256, ""}, // <|endoftext|>: control
		{gpt2, 220, " "},  // Ġ
		{gpt2, 198, "\n"}, // Ċ
	} {
		if got := string(tc.tok.TokenBytes(tc.id)); got != tc.want {
			t.Errorf("TokenBytes(%d) = %q (piece %q), want %q", tc.id, got, tc.tok.Piece(tc.id), tc.want)
		}
	}
	if got := spm.Piece(403); got != "▁Once" {
		t.Errorf("Piece(403) = %q, want %q", got, "▁Once")
	}
}
