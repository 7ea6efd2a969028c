package shareddata

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// VocabNames are the llama.cpp tokenizer test sets in shared/vocab
// (ggml-vocab-NAME.gguf with its .inp and .out), as its README lists them.
var VocabNames = []string{
	"llama-spm", "phi-3", "gpt-2", "starcoder", "falcon", "deepseek-coder", "deepseek-llm",
	"llama-bpe", "qwen2", "qwen35", "gemma-4",
}

// VocabVector is one tokenizer test: a text and the ids llama.cpp gives it
// (no BOS, special tokens not parsed).
type VocabVector struct {
	Text string
	IDs  []int32 // never nil
}

// VocabFile returns the path of ggml-vocab-NAME.gguf, failing tb if missing.
func VocabFile(tb testing.TB, name string) string {
	tb.Helper()
	return Path(tb, "vocab/ggml-vocab-"+name+".gguf")
}

// ReadVocabVectors reads ggml-vocab-NAME.gguf.inp and .out the way
// llama.cpp's tests/test-tokenizer-0 does: the texts of .inp are separated by
// "\n__ggml_vocab_test__\n" (a text never includes the newline before the
// separator; what follows the last separator, if anything, is one more text)
// and line i of .out holds the ids of text i, separated by spaces.
func ReadVocabVectors(tb testing.TB, name string) []VocabVector {
	tb.Helper()
	base := "vocab/ggml-vocab-" + name + ".gguf"
	inp, err := os.ReadFile(Path(tb, base+".inp"))
	if err != nil {
		tb.Fatal(err)
	}
	outb, err := os.ReadFile(Path(tb, base+".out"))
	if err != nil {
		tb.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	var texts []string
	for rest := string(inp); rest != ""; {
		k := strings.Index(rest, sep)
		if k < 0 {
			texts = append(texts, rest)
			break
		}
		texts = append(texts, rest[:k])
		rest = rest[k+len(sep):]
	}
	lines := strings.Split(strings.TrimSuffix(string(outb), "\n"), "\n")
	if len(lines) != len(texts) {
		tb.Fatalf("%s: %d texts but %d id lines", base, len(texts), len(lines))
	}
	vs := make([]VocabVector, len(texts))
	for i, text := range texts {
		vs[i] = VocabVector{Text: text, IDs: []int32{}}
		for _, f := range strings.Fields(lines[i]) {
			n, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				tb.Fatalf("%s.out line %d: %v", base, i+1, err)
			}
			vs[i].IDs = append(vs[i].IDs, int32(n))
		}
	}
	return vs
}
