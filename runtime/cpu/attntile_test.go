package cpu

import (
	"fmt"
	"testing"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// TestAttendTiles feeds a 200-token prompt whole, with attnScoreFloats set
// so the chunk's attention runs in tiles of 1, 7, 64 or all 200 tokens, and
// compares it with the prompt fed token by token (the in-place kernels), on a model with a sliding window on most layers
// (gemma3-256, window 8: tiles past position 64 skip the columns before
// their window) and on stories260K (no window). The last token's logits
// must agree up to summation order: on gemma3-256
// within TestWindowPaths' tolerances (its random weights turn rounding into
// logit steps of a few hundredths, as chunked against token-by-token
// prompts do), on stories260K within 1e-3 (0.03 with an F16 cache); a tile that sees one position
// too many or too few moves them by far more.
func TestAttendTiles(t *testing.T) {
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
			// run feeds the prompt in chunks of chunk tokens with the score
			// budget floats and returns the last token's logits.
			run := func(chunk, floats int) []float32 {
				saved := attnScoreFloats
				attnScoreFloats = floats
				defer func() { attnScoreFloats = saved }()
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
			// Token by token: the in-place kernels, no product at all.
			want := run(1, 1<<30)
			group := m.HP.Heads / m.HP.KVHeads
			for _, tile := range []int{1, 7, 64, n} {
				t.Run(fmt.Sprintf("%s/kv%s/tile%d", tc.file, kv, tile), func(t *testing.T) {
					got := run(n, group*n*tile)
					d := maxAbs(got, want)
					t.Logf("logits %.3g from token by token", d)
					if d > tc.tol[kv] {
						t.Errorf("tiles of %d tokens: logits %.3g from token by token", tile, d)
					}
					if g, w := sample.Argmax(got), sample.Argmax(want); g != w {
						t.Errorf("tiles of %d tokens: argmax %d, token by token %d", tile, g, w)
					}
				})
			}
		}
	}
}
