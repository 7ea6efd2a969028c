package tokenizer

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/weft-inference/weft/internal/shareddata"
)

// longText returns about n bytes of mixed text: the vocabulary test strings
// (prose, code, CJK, emoji, long whitespace and digit runs) repeated.
func longText(tb testing.TB, n int) string {
	var sb strings.Builder
	var parts []string
	for _, name := range []string{"llama-spm", "deepseek-llm"} {
		b, err := os.ReadFile(shareddata.Path(tb, "vocab/ggml-vocab-"+name+".gguf.inp"))
		if err != nil {
			tb.Fatal(err)
		}
		parts = append(parts, strings.ReplaceAll(string(b), "__ggml_vocab_test__", "Once upon a time, there was a little dog."))
	}
	for sb.Len() < n {
		for _, p := range parts {
			sb.WriteString(p)
		}
	}
	return sb.String()[:n]
}

// BenchmarkEncodeLong encodes long prompts. Encoding is O(n log n) in the
// text length (heap-driven merges, linear pre-tokenizers and special-token
// scan), so ns/token should stay flat from 40 KB to 400 KB (about 10k to
// 100k tokens).
//
//	go test -run '^$' -bench EncodeLong -benchtime 2x ./runtime/tokenizer
func BenchmarkEncodeLong(b *testing.B) {
	for _, name := range []string{"llama-spm", "gpt-2", "deepseek-llm"} {
		tok := load(b, "vocab/ggml-vocab-"+name+".gguf")
		for _, size := range []int{40_000, 400_000} {
			text := longText(b, size)
			b.Run(fmt.Sprintf("%s/%dKB", name, size/1000), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				var n int
				for b.Loop() {
					n = len(tok.Encode(text, true, true))
				}
				b.ReportMetric(float64(n), "tokens")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/token")
			})
		}
	}
}

// BenchmarkStreamDecode measures per-token streaming detokenization.
func BenchmarkStreamDecode(b *testing.B) {
	tok := load(b, "vocab/ggml-vocab-gpt-2.gguf")
	ids := tok.Encode(longText(b, 40_000), false, false)
	b.ResetTimer()
	for b.Loop() {
		d := tok.NewStreamDecoder()
		for _, id := range ids {
			d.Add(id)
		}
		d.Flush()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ids)), "ns/token")
}
