package tokenizer

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weft-inference/weft/runtime/gguf"
)

// tinyVocab describes a synthetic vocabulary; build writes it as GGUF and
// loads it back.
type tinyVocab struct {
	model  string
	tokens []string
	types  []int32
	scores []float32
	merges []string
	extra  map[string]any
}

func (v tinyVocab) build(t *testing.T) (*Tokenizer, error) {
	t.Helper()
	w := gguf.NewWriter()
	w.AddKV("general.architecture", "llama")
	if v.model != "" {
		w.AddKV(keyModel, v.model)
	}
	if v.tokens != nil {
		w.AddKV(keyTokens, v.tokens)
	}
	if v.types != nil {
		w.AddKV(keyTokenType, v.types)
	}
	if v.scores != nil {
		w.AddKV(keyScores, v.scores)
	}
	if v.merges != nil {
		w.AddKV(keyMerges, v.merges)
	}
	for k, x := range v.extra {
		w.AddKV(k, x)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return FromGGUF(f)
}

// spmVocab is a small SentencePiece vocabulary with byte fallback, a
// user-defined token and chat control tokens.
func spmVocab(name string) tinyVocab {
	toks := []string{"<unk>", "<s>", "</s>"}
	types := []int32{typeUnknown, typeControl, typeControl}
	for b := range 256 {
		toks = append(toks, fmt.Sprintf("<0x%02X>", b))
		types = append(types, typeByte)
	}
	normal := []string{"▁", "h", "i", "▁h", "▁hi", "x", "▁x"}
	for _, s := range normal {
		toks = append(toks, s)
		types = append(types, typeNormal)
	}
	toks = append(toks, "<|user|>", "<|end|>", "<|im_end|>")
	types = append(types, typeUserDefined, typeControl, typeNormal)
	scores := make([]float32, len(toks))
	for i := range scores {
		scores[i] = -float32(i) // earlier tokens merge first
	}
	return tinyVocab{model: "llama", tokens: toks, types: types, scores: scores,
		extra: map[string]any{"general.name": name}}
}

func TestFromGGUFErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v       tinyVocab
		want    error
		wantMsg string
	}{
		{"no model", tinyVocab{tokens: []string{"a"}}, ErrInvalid, "tokenizer.ggml.model"},
		{"bert", tinyVocab{model: "bert", tokens: []string{"a"}}, ErrUnsupported, `"bert"`},
		{"t5", tinyVocab{model: "t5", tokens: []string{"a"}}, ErrUnsupported, `"t5"`},
		{"no tokens", tinyVocab{model: "llama"}, ErrInvalid, "tokens"},
		{"bad pre", tinyVocab{model: "gpt2", tokens: []string{"a"}, merges: []string{},
			extra: map[string]any{keyPre: "chameleon"}}, ErrUnsupported, `"chameleon"`},
		{"bpe without merges", tinyVocab{model: "gpt2", tokens: []string{"a"}}, ErrInvalid, "merges"},
		{"scores count", tinyVocab{model: "llama", tokens: []string{"a", "b"}, scores: []float32{0}}, ErrInvalid, "scores"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.v.build(t)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("FromGGUF error = %v, want %v mentioning %s", err, tc.want, tc.wantMsg)
			}
		})
	}
}

func TestSpecialTokens(t *testing.T) {
	tok, err := spmVocab("tiny").build(t)
	if err != nil {
		t.Fatal(err)
	}
	id := func(s string) int32 {
		i, ok := tok.ID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return i
	}
	user, end, imEnd := id("<|user|>"), id("<|end|>"), id("<|im_end|>")
	lt := tok.byteTokens['<']
	for _, tc := range []struct {
		text                     string
		addSpecial, parseSpecial bool
		want                     []int32
	}{
		{"hi", true, false, []int32{1, id("▁hi")}},
		{"hi", false, false, []int32{id("▁hi")}},
		// user-defined tokens are always recognised; the text after a
		// special token gets the space prefix again.
		{"<|user|>hi", false, false, []int32{user, id("▁hi")}},
		// control tokens only with parseSpecial.
		{"<|end|>", false, true, []int32{end}},
		{"x<s>", false, true, []int32{id("▁x"), 1}},
		{"<s>", false, false, []int32{id("▁"), lt, tok.byteTokens['s'], tok.byteTokens['>']}},
		// whitespace after a special token is kept without rstrip.
		{"<|user|> hi", false, false, []int32{user, id("▁"), id("▁hi")}},
		// <|im_end|> was declared normal but is forced to control.
		{"<|im_end|>", false, true, []int32{imEnd}},
	} {
		got := tok.Encode(tc.text, tc.addSpecial, tc.parseSpecial)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Encode(%q, %v, %v) (-want +got):\n%s", tc.text, tc.addSpecial, tc.parseSpecial, diff)
		}
	}
	if !tok.IsEOG(end) || !tok.IsEOG(imEnd) || !tok.IsEOG(tok.EOS()) || tok.IsEOG(user) || tok.IsEOG(tok.BOS()) {
		t.Errorf("IsEOG wrong: EOGs = %v", tok.EOGs())
	}
	if !tok.IsControl(imEnd) || !tok.IsControl(1) || tok.IsControl(user) || tok.IsControl(-5) {
		t.Errorf("IsControl wrong")
	}
	// Detected by text, in the order llama.cpp lists the candidates.
	if tok.EOT() != imEnd {
		t.Errorf("EOT = %d, want %d (<|im_end|>)", tok.EOT(), imEnd)
	}
	if got := tok.Decode(tok.Encode("hi<|user|>x", true, true)); got != "hi<|user|> x" {
		t.Errorf("Decode = %q", got)
	}
}

// TestPhi3RStrip: llama.cpp gives Phi-3's special tokens the rstrip
// attribute (by model name), so whitespace after them is dropped.
func TestPhi3RStrip(t *testing.T) {
	tok, err := spmVocab("Phi3 mini").build(t)
	if err != nil {
		t.Fatal(err)
	}
	user, _ := tok.ID("<|user|>")
	hi, _ := tok.ID("▁hi")
	got := tok.Encode("<|user|>  \n hi", false, false)
	if diff := cmp.Diff([]int32{user, hi}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDefaults(t *testing.T) {
	bpe := func(pre string, extra map[string]any) tinyVocab {
		toks := []string{"a", "b", "ab", "<|begin_of_text|>", "<|eot_id|>"}
		m := map[string]any{keyPre: pre, "tokenizer.ggml.bos_token_id": uint32(3)}
		for k, v := range extra {
			m[k] = v
		}
		return tinyVocab{model: "gpt2", tokens: toks, merges: []string{"a b"},
			types: []int32{1, 1, 1, 3, 3}, extra: m}
	}
	for _, tc := range []struct {
		name           string
		v              tinyVocab
		addBOS, addEOS bool
		bos, eos       int32
	}{
		{"spm", spmVocab("x"), true, false, 1, 2},
		{"spm flags", func() tinyVocab {
			v := spmVocab("x")
			v.extra[keyAddBOS] = false
			v.extra[keyAddEOS] = true
			return v
		}(), false, true, 1, 2},
		{"gpt-2", bpe("gpt-2", nil), false, false, 3, -1}, // default eos 11 is out of range
		{"llama-bpe", bpe("llama-bpe", nil), true, false, 3, -1},
		{"llama-bpe no bos", bpe("llama-bpe", map[string]any{keyAddBOS: false}), false, false, 3, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := tc.v.build(t)
			if err != nil {
				t.Fatal(err)
			}
			if tok.AddBOS() != tc.addBOS || tok.AddEOS() != tc.addEOS || tok.BOS() != tc.bos || tok.EOS() != tc.eos {
				t.Errorf("AddBOS %v AddEOS %v BOS %d EOS %d, want %v %v %d %d",
					tok.AddBOS(), tok.AddEOS(), tok.BOS(), tok.EOS(), tc.addBOS, tc.addEOS, tc.bos, tc.eos)
			}
		})
	}
}

// TestBPEMergeOrder checks rank order and ignore_merges on a tiny byte-level
// vocabulary.
func TestBPEMergeOrder(t *testing.T) {
	toks := []string{"a", "b", "c", "ab", "bc", "abc", "Ġ", "Ġa"}
	for _, tc := range []struct {
		pre    string
		merges []string
		text   string
		want   []string
	}{
		{"gpt-2", []string{"a b", "b c"}, "abc", []string{"ab", "c"}},
		{"gpt-2", []string{"b c", "a b"}, "abc", []string{"a", "bc"}},
		{"gpt-2", []string{"b c", "a bc"}, "abc", []string{"abc"}},
		// "Ġ a" is not a merge: " abc" -> Ġ + (a b) + c
		{"gpt-2", []string{"a b", "b c"}, " abc", []string{"Ġ", "ab", "c"}},
		// llama3 takes a word that is a token as it is.
		{"llama-bpe", []string{"a b", "b c"}, "abc", []string{"abc"}},
	} {
		tok, err := tinyVocab{model: "gpt2", tokens: toks, merges: tc.merges,
			extra: map[string]any{keyPre: tc.pre}}.build(t)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, id := range tok.Encode(tc.text, false, false) {
			got = append(got, tok.Piece(id))
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s %v Encode(%q) (-want +got):\n%s", tc.pre, tc.merges, tc.text, diff)
		}
	}
}

// TestConcurrentEncode runs Encode and Decode from several goroutines on one
// Tokenizer (run with -race).
func TestConcurrentEncode(t *testing.T) {
	for _, rel := range []string{"models/stories260K.gguf", "vocab/ggml-vocab-deepseek-coder.gguf"} {
		tok := load(t, rel)
		want := tok.Encode("Hello <s> world, Führer 1234 😀", true, true)
		t.Run(rel, func(t *testing.T) {
			for i := range 4 {
				t.Run(fmt.Sprint(i), func(t *testing.T) {
					t.Parallel()
					for range 50 {
						got := tok.Encode("Hello <s> world, Führer 1234 😀", true, true)
						if diff := cmp.Diff(want, got); diff != "" {
							t.Fatalf("(-want +got):\n%s", diff)
						}
						tok.Decode(got)
					}
				})
			}
		})
	}
}

func TestSPMKeyOrder(t *testing.T) {
	scores := []float32{float32(math.Inf(-1)), -1e9, -3.5, -1, float32(math.Copysign(0, -1)), 0, 1e-30, 2, 1e9, float32(math.Inf(1))}
	for i := 1; i < len(scores); i++ {
		hi, lo := spmKey(scores[i], 7), spmKey(scores[i-1], 7)
		if scores[i] == scores[i-1] {
			if hi != lo {
				t.Errorf("spmKey(%v) != spmKey(%v)", scores[i], scores[i-1])
			}
			continue
		}
		if hi >= lo {
			t.Errorf("spmKey(%v) = %x, not before spmKey(%v) = %x", scores[i], hi, scores[i-1], lo)
		}
	}
	if spmKey(1, 3) >= spmKey(1, 4) {
		t.Errorf("ties must go to the leftmost pair")
	}
}

// TestGemma4Style checks the SentencePiece-style BPE of tokenizer.ggml.model
// "gemma4" on a tiny vocabulary: spaces become "▁" before merging, merges
// run by rank on UTF-8 characters, a run of newlines that is a token is
// taken whole (whatever the merges would make of it), a symbol that is not a
// token falls back to "<0xAB>" tokens, BOS is added even when the file says
// add_bos_token=false, and decoding turns "▁" back into spaces.
func TestGemma4Style(t *testing.T) {
	toks := []string{"<pad>", "<eos>", "<bos>", "<turn|>"}
	types := []int32{typeControl, typeControl, typeControl, typeControl}
	for b := range 256 {
		toks = append(toks, fmt.Sprintf("<0x%02X>", b))
		types = append(types, typeByte)
	}
	for _, s := range []string{"a", "b", "ab", "▁", "▁a", "\n", "\n\n", "\n\n\n"} {
		toks = append(toks, s)
		types = append(types, typeNormal)
	}
	tok, err := tinyVocab{model: "gemma4", tokens: toks, types: types,
		merges: []string{"a b", "▁ a", "\n \n"},
		extra: map[string]any{"tokenizer.ggml.bos_token_id": uint32(2), "tokenizer.ggml.eos_token_id": uint32(1),
			keyAddBOS: false}}.build(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text       string
		addSpecial bool
		want       []string
	}{
		// "a b" (rank 0) before "▁ a" (rank 1); "▁ ab" is no merge.
		{" ab", false, []string{"▁", "ab"}},
		{"a a", false, []string{"a", "▁a"}},
		// Merges alone would give "\n\n" "\n".
		{"\n\n\n", false, []string{"\n\n\n"}},
		{"a\n\nb", false, []string{"a", "\n\n", "b"}},
		{"é", false, []string{"<0xC3>", "<0xA9>"}},
		{"a", true, []string{"<bos>", "a"}},
		// Control token text is plain text without parseSpecial.
		{"<turn|>a", false, []string{"<0x3C>", "<0x74>", "<0x75>", "<0x72>", "<0x6E>", "<0x7C>", "<0x3E>", "a"}},
	} {
		ids := tok.Encode(tc.text, tc.addSpecial, false)
		var got []string
		for _, id := range ids {
			got = append(got, tok.Piece(id))
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Encode(%q, %v) (-want +got):\n%s", tc.text, tc.addSpecial, diff)
		}
		if back := tok.Decode(ids); back != tc.text {
			t.Errorf("Decode(Encode(%q)) = %q", tc.text, back)
		}
	}
	turn, _ := tok.ID("<turn|>")
	if !tok.IsEOG(turn) || !tok.AddBOS() || tok.BOS() != 2 {
		t.Errorf("IsEOG(<turn|>) %v AddBOS %v BOS %d, want true true 2", tok.IsEOG(turn), tok.AddBOS(), tok.BOS())
	}
}
