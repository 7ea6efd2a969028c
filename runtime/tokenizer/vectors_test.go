package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/gguf"
)

// vocabNames are the llama.cpp vocabulary test sets in shared/vocab.
var vocabNames = []string{"llama-spm", "phi-3", "gpt-2", "starcoder", "falcon", "deepseek-coder", "deepseek-llm", "llama-bpe", "qwen2"}

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

type vector struct {
	text string
	ids  []int32
}

// readVectors reads NAME.gguf.inp and .out the way llama.cpp's
// test-tokenizer-0 does: the .inp texts are separated by the line
// "__ggml_vocab_test__" (each text is what precedes "\n__ggml_vocab_test__\n",
// so a text never includes the newline before the separator), and line i of
// .out holds the ids of text i.
func readVectors(tb testing.TB, name string) []vector {
	tb.Helper()
	inp, err := os.ReadFile(shareddata.Path(tb, "vocab/ggml-vocab-"+name+".gguf.inp"))
	if err != nil {
		tb.Fatal(err)
	}
	outb, err := os.ReadFile(shareddata.Path(tb, "vocab/ggml-vocab-"+name+".gguf.out"))
	if err != nil {
		tb.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	var texts []string
	rest := string(inp)
	for {
		k := strings.Index(rest, sep)
		if k < 0 {
			break
		}
		texts = append(texts, rest[:k])
		rest = rest[k+len(sep):]
	}
	if rest != "" {
		tb.Fatalf("%s.inp: %q after the last separator", name, rest)
	}
	lines := strings.Split(strings.TrimSuffix(string(outb), "\n"), "\n")
	if len(lines) != len(texts) {
		tb.Fatalf("%s: %d texts but %d id lines", name, len(texts), len(lines))
	}
	vs := make([]vector, len(texts))
	for i, text := range texts {
		vs[i].text = text
		for _, f := range strings.Fields(lines[i]) {
			n, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				tb.Fatalf("%s.out line %d: %v", name, i+1, err)
			}
			vs[i].ids = append(vs[i].ids, int32(n))
		}
	}
	return vs
}

func TestVocabVectors(t *testing.T) {
	for _, name := range vocabNames {
		t.Run(name, func(t *testing.T) {
			tok := load(t, "vocab/ggml-vocab-"+name+".gguf")
			vs := readVectors(t, name)
			if len(vs) < 40 {
				t.Fatalf("only %d vectors", len(vs))
			}
			for i, v := range vs {
				got := tok.Encode(v.text, false, false)
				if got == nil {
					got = []int32{}
				}
				want := v.ids
				if want == nil {
					want = []int32{}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("vector %d %q: Encode mismatch (-want +got):\n%s", i, v.text, diff)
				}
			}
		})
	}
}

// TestVocabRoundTrip checks Decode(Encode(x)) == x on every vector: all
// these vocabularies are lossless on valid UTF-8 text without special tokens.
func TestVocabRoundTrip(t *testing.T) {
	for _, name := range vocabNames {
		t.Run(name, func(t *testing.T) {
			tok := load(t, "vocab/ggml-vocab-"+name+".gguf")
			for i, v := range readVectors(t, name) {
				for _, addSpecial := range []bool{false, true} {
					ids := tok.Encode(v.text, addSpecial, false)
					if got := tok.Decode(ids); got != v.text {
						t.Errorf("vector %d addSpecial=%v: Decode(Encode(%q)) = %q", i, addSpecial, v.text, got)
					}
				}
			}
		})
	}
}

// TestVocabAddSpecial checks the BOS default of the BPE vocabularies whose
// GGUF has no add_bos_token key, against llama-tokenize (llama.cpp b4748,
// shared/vocab/README.md): Llama 3 ("llama-bpe") adds BOS, Qwen2 does not.
func TestVocabAddSpecial(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []int32
	}{
		{"llama-bpe", []int32{128000, 9906, 1917}},
		{"qwen2", []int32{9707, 1879}},
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
