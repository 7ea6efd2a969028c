package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEncodeSegments(t *testing.T) {
	tok := load(t, "models/stories260K.gguf")
	eos := tok.EOS()
	for _, tc := range []struct {
		name    string
		segs    []Segment
		wantEOS int // occurrences of the EOS id
	}{
		{"content </s> stays text", []Segment{{Text: "Hi "}, {Text: "a </s> b"}, {Text: "!"}}, 0},
		{"template </s> is EOS", []Segment{{Text: "a</s>", ParseSpecial: true}, {Text: "</s>"}}, 1},
		{"both", []Segment{{Text: "</s>", ParseSpecial: true}, {Text: "</s>"}, {Text: "</s>", ParseSpecial: true}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tok.EncodeSegments(tc.segs, false)
			n := 0
			for _, id := range got {
				if id == eos {
					n++
				}
			}
			if n != tc.wantEOS {
				t.Errorf("EOS %d appears %d times in %v, want %d", eos, n, got, tc.wantEOS)
			}
		})
	}
	// Without special text, segments tokenize as the whole text does: the
	// boundaries leave no trace.
	for _, rel := range []string{"models/stories260K.gguf", "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-llama-spm.gguf"} {
		tok := load(t, rel)
		parts := []string{"Once upon", " a ti", "me, there was", "  a little", "\ndog."}
		var segs []Segment
		for i, p := range parts {
			segs = append(segs, Segment{Text: p, ParseSpecial: i%2 == 0})
		}
		want := tok.Encode(strings.Join(parts, ""), true, true)
		if diff := cmp.Diff(want, tok.EncodeSegments(segs, true)); diff != "" {
			t.Errorf("%s: (-Encode +EncodeSegments):\n%s", rel, diff)
		}
	}
}

// adversarial returns the inputs a hostile client would pick, of n bytes:
// one repeated character (one long word, many equal merges), a long run of
// characters without merges, and text that falls back to byte tokens.
func adversarial(n int) map[string]string {
	var noMerge, bytes strings.Builder
	for i := 0; noMerge.Len() < n; i++ {
		noMerge.WriteRune(rune(0x4E00 + (i*7919)%20000)) // CJK, rarely merged
	}
	for i := 0; bytes.Len() < n; i++ {
		bytes.WriteRune(rune(0x10000 + (i*104729)%0xFFFF)) // astral plane: byte fallback
	}
	return map[string]string{
		"repeat":   strings.Repeat("a", n),
		"spaces":   strings.Repeat(" ", n),
		"nomerge":  noMerge.String(),
		"bytefall": bytes.String(),
	}
}

// BenchmarkEncodeAdversarial: ns/byte should stay flat from 1 KB to 100 KB
// on every input (linear time, up to the heap's log factor).
//
//	go test -run '^$' -bench EncodeAdversarial ./runtime/tokenizer
func BenchmarkEncodeAdversarial(b *testing.B) {
	for _, rel := range []string{"models/stories260K.gguf", "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf"} {
		tok := load(b, rel)
		name := strings.TrimSuffix(rel[strings.LastIndex(rel, "/")+1:], ".gguf")
		for _, size := range []int{1_000, 10_000, 100_000} {
			inputs := adversarial(size)
			keys := make([]string, 0, len(inputs))
			for k := range inputs {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				text := inputs[k]
				b.Run(fmt.Sprintf("%s/%s/%dKB", name, k, size/1000), func(b *testing.B) {
					b.SetBytes(int64(len(text)))
					for b.Loop() {
						tok.Encode(text, true, false)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(text)), "ns/byte")
				})
			}
		}
	}
}
