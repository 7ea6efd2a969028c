package cpu

import (
	"fmt"
	"testing"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// TestAttendChunks feeds a 200-token prompt in chunks of 200, 64, 37 or 16
// tokens (kernels.AttendChunk, whose tiles of a few tokens then start at
// different positions) and compares it with the prompt fed token by token
// (the in-place kernels), on a model with a sliding window on most layers
// (gemma3-256, window 8: most of a chunk's tokens see fewer positions than
// the chunk's first) and on stories260K (no window). The last token's
// logits must agree up to summation order: on gemma3-256 within
// TestWindowPaths' tolerances (its random weights turn rounding into logit
// steps of a few hundredths, as chunked against token-by-token prompts
// do), on stories260K within 1e-3 (0.03 with an F16 cache); a token that
// sees one position too many or too few moves them by far more.
func TestAttendChunks(t *testing.T) {
	const n = 200
	prompt := invTokens(5, n)
	for _, tc := range []struct {
		file string
		tol  map[string]float64 // by KV type
	}{
		{"synth/arch2/models/synth-gemma3-256-F32.gguf", map[string]float64{"f32": 0.05, "f16": 0.1}},
		{"models/stories260K.gguf", map[string]float64{"f32": 1e-3, "f16": 0.03}},
	} {
		m := loadModel(t, tc.file)
		for _, kv := range []string{"f32", "f16"} {
			b, err := New(m, Config{KVType: kv, BlockSize: 16, NumBlocks: 16})
			if err != nil {
				t.Fatal(err)
			}
			// run feeds the prompt in chunks of chunk tokens and returns the
			// last token's logits.
			run := func(chunk int) []float32 {
				r := newSeqRunner(0, (n+15)/16)
				lg := make([]float32, m.HP.VocabSize)
				for r.pos < n {
					toks := prompt[r.pos:min(n, r.pos+chunk)]
					var out []float32
					if r.pos+len(toks) == n {
						out = lg
					}
					if err := b.Forward(t.Context(), []batch.SeqStep{{Seq: 1, Tokens: toks, Pos: r.pos, Blocks: r.blocks}}, [][]float32{out}); err != nil {
						t.Fatal(err)
					}
					r.pos += len(toks)
				}
				return lg
			}
			// Token by token: the in-place kernels, no chunk at all.
			want := run(1)
			for _, chunk := range []int{n, 64, 37, 16} {
				t.Run(fmt.Sprintf("%s/kv%s/chunk%d", tc.file, kv, chunk), func(t *testing.T) {
					got := run(chunk)
					d := maxAbs(got, want)
					t.Logf("logits %.3g from token by token", d)
					if d > tc.tol[kv] {
						t.Errorf("chunks of %d tokens: logits %.3g from token by token", chunk, d)
					}
					if g, w := sample.Argmax(got), sample.Argmax(want); g != w {
						t.Errorf("chunks of %d tokens: argmax %d, token by token %d", chunk, g, w)
					}
				})
			}
		}
	}
}
