package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/gguf"
)

var (
	loadMu sync.Mutex
	loaded = map[string]*Tokenizer{}
)

// load returns the tokenizer of a shared GGUF file (cached across tests).
func load(tb testing.TB, rel string) *Tokenizer {
	tb.Helper()
	loadMu.Lock()
	defer loadMu.Unlock()
	if t, ok := loaded[rel]; ok {
		return t
	}
	f, err := gguf.Open(shareddata.Path(tb, rel))
	if err != nil {
		tb.Fatalf("open %s: %v", rel, err)
	}
	defer f.Close()
	t, err := FromGGUF(f)
	if err != nil {
		tb.Fatalf("FromGGUF(%s): %v", rel, err)
	}
	loaded[rel] = t
	return t
}

func TestVocabVectors(t *testing.T) {
	for _, name := range shareddata.VocabNames {
		t.Run(name, func(t *testing.T) {
			tok := load(t, "vocab/ggml-vocab-"+name+".gguf")
			vs := shareddata.ReadVocabVectors(t, name)
			if len(vs) < 40 {
				t.Fatalf("only %d vectors", len(vs))
			}
			for i, v := range vs {
				got := tok.Encode(v.Text, false, false)
				if got == nil {
					got = []int32{}
				}
				if diff := cmp.Diff(v.IDs, got); diff != "" {
					t.Errorf("vector %d %q: Encode mismatch (-want +got):\n%s", i, v.Text, diff)
				}
			}
		})
	}
}

// TestVocabRoundTrip checks Decode(Encode(x)) == x on every vector: all
// these vocabularies are lossless on valid UTF-8 text without special tokens.
func TestVocabRoundTrip(t *testing.T) {
	for _, name := range shareddata.VocabNames {
		t.Run(name, func(t *testing.T) {
			tok := load(t, "vocab/ggml-vocab-"+name+".gguf")
			for i, v := range shareddata.ReadVocabVectors(t, name) {
				for _, addSpecial := range []bool{false, true} {
					ids := tok.Encode(v.Text, addSpecial, false)
					if got := tok.Decode(ids); got != v.Text {
						t.Errorf("vector %d addSpecial=%v: Decode(Encode(%q)) = %q", i, addSpecial, v.Text, got)
					}
				}
			}
		})
	}
}

// TestVocabAddSpecial checks the BOS default of the BPE vocabularies whose
// GGUF has no add_bos_token key, against llama-tokenize (llama.cpp b4748,
// shared/vocab/README.md): Llama 3 ("llama-bpe") adds BOS, Qwen2 does not.
// Qwen3.5 has no key either and no BOS rule in llama.cpp; Gemma 4 says
// add_bos_token=true with BOS 2 (the ids after BOS are the vectors' own).
func TestVocabAddSpecial(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []int32
	}{
		{"llama-bpe", []int32{128000, 9906, 1917}},
		{"qwen2", []int32{9707, 1879}},
		{"qwen35", []int32{9707, 1879}},
		{"gemma-4", []int32{2, 9259, 1902}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := load(t, "vocab/ggml-vocab-"+tc.name+".gguf")
			got := tok.Encode("Hello world", true, false)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Encode(%q, addSpecial) mismatch (-want +got):\n%s", "Hello world", diff)
			}
		})
	}
}

type goldenCase struct {
	Text   string  `json:"text"`
	AddBOS bool    `json:"add_bos"`
	IDs    []int32 `json:"ids"`
	Cmd    string  `json:"cmd"`
}

// TestStoriesGolden reproduces llama-tokenize on stories260K: BOS as the
// case says, special tokens parsed (llama-tokenize's default).
func TestStoriesGolden(t *testing.T) {
	tok := load(t, "models/stories260K.gguf")
	b, err := os.ReadFile(shareddata.Path(t, "golden/stories260K.tokenize.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 36 {
		t.Fatalf("only %d cases", len(g.Cases))
	}
	for i, c := range g.Cases {
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			got := tok.Encode(c.Text, c.AddBOS, true)
			if got == nil {
				got = []int32{}
			}
			want := c.IDs
			if want == nil {
				want = []int32{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Encode(%q, addBOS=%v) mismatch (-want +got):\n%s\ncmd: %s", c.Text, c.AddBOS, diff, c.Cmd)
			}
		})
	}
}
