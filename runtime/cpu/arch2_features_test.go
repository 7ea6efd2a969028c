package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/llama"
	"github.com/weft-inference/weft/runtime/sample"
)

// TestSynthArch2Ablations removes one feature at a time from the loaded
// qwen3-256 and gemma3-256 F32 models (a test-only edit of the Model) and
// requires the result to miss llama.cpp's golden, which the whole model
// matches (TestSynthArch2Golden): so each feature is really computed, and
// the golden test would catch its loss. A variant misses the golden when a
// greedy token differs or a teacher-forced top-5 logit is off by more than
// the F32 tolerance of TestSynthArch2Golden. The log gives, per prompt, the
// tokens equal to the golden before the first difference and the
// first-step max abs logit change (compare arch2/README.md, "Sensitivity").
func TestSynthArch2Ablations(t *testing.T) {
	allLayers := func(f func(l *llama.Layer)) func(m *llama.Model) {
		return func(m *llama.Model) {
			for i := range m.Layers {
				f(&m.Layers[i])
			}
		}
	}
	slidingLayers := func(f func(l *llama.Layer)) func(m *llama.Model) {
		return func(m *llama.Model) {
			for i := range m.Layers {
				if m.Layers[i].Window != 0 {
					f(&m.Layers[i])
				}
			}
		}
	}
	tests := []struct {
		preset, name string
		tol          float64 // TestSynthArch2Golden's F32 tolerance
		edit         func(m *llama.Model)
	}{
		{"qwen3-256", "no q/k norms", 1e-3, allLayers(func(l *llama.Layer) { l.QNorm, l.KNorm = nil, nil })},
		{"qwen3-256", "no q norm", 1e-3, allLayers(func(l *llama.Layer) { l.QNorm = nil })},
		{"qwen3-256", "no k norm", 1e-3, allLayers(func(l *llama.Layer) { l.KNorm = nil })},
		{"gemma3-256", "no sliding window", 0.05, allLayers(func(l *llama.Layer) { l.Window = 0 })},
		{"gemma3-256", "window 7", 0.05, slidingLayers(func(l *llama.Layer) { l.Window = 7 })},
		{"gemma3-256", "window 9", 0.05, slidingLayers(func(l *llama.Layer) { l.Window = 9 })},
		{"gemma3-256", "no q/k norms", 0.05, allLayers(func(l *llama.Layer) { l.QNorm, l.KNorm = nil, nil })},
		{"gemma3-256", "no post-attention norm", 0.05, allLayers(func(l *llama.Layer) { l.PostAttnNorm = nil })},
		{"gemma3-256", "no post-FFN norm", 0.05, allLayers(func(l *llama.Layer) { l.PostFFNNorm = nil })},
		{"gemma3-256", "no embedding scale", 0.05, func(m *llama.Model) { m.HP.EmbedScale = 0 }},
		{"gemma3-256", "global rope base on sliding layers", 0.05, slidingLayers(func(l *llama.Layer) { l.RopeBase = 1e6 })},
		{"gemma3-256", "SiLU instead of GELU", 0.05, func(m *llama.Model) { m.HP.Act = llama.ActSiLU }},
		{"gemma3-256", "scale 1/sqrt(n_embd/n_head)", 0.05, func(m *llama.Model) { m.HP.QScale = 1 / float32(math.Sqrt(64)) }},
	}
	for _, tc := range tests {
		t.Run(tc.preset+"/"+tc.name, func(t *testing.T) {
			name := "synth-" + tc.preset + "-F32"
			m := loadModel(t, "synth/arch2/models/"+name+".gguf")
			tc.edit(m)
			g := readGolden(t, "synth/arch2/golden/"+name+".json")
			b, err := New(m, Config{KVType: "f32", BlockSize: 16, NumBlocks: 16})
			if err != nil {
				t.Fatal(err)
			}
			missed := false
			var lead, first []string
			for _, res := range g.Results {
				got, _ := greedy(t, b, res.PromptTokenIDs, len(res.GeneratedTokenIDs), nil)
				same := 0
				for same < len(got) && got[same] == res.GeneratedTokenIDs[same] {
					same++
				}
				_, logits := greedy(t, b, res.PromptTokenIDs, len(res.GeneratedTokenIDs), res.GeneratedTokenIDs)
				worst := 0.0
				for i, st := range res.Steps {
					for _, top := range st.Top {
						worst = max(worst, math.Abs(float64(logits[i][int(top[0])])-top[1]))
					}
				}
				missed = missed || same < len(got) || worst > tc.tol
				lead = append(lead, fmt.Sprint(same))
				first = append(first, fmt.Sprintf("%.3g", maxAbs(logits[0], res.FirstStepLogits)))
			}
			t.Logf("equal leading tokens %v; first-step max abs logit change %v", lead, first)
			if !missed {
				t.Errorf("the model without %s still matches llama.cpp's golden: the feature is not exercised", tc.name)
			}
		})
	}
}

// TestWindowPaths runs gemma3-256 (sliding window 8 on five of six layers)
// on a 70-token prompt fed whole, in chunks of 7 and one token at a time,
// with each KV type and kernel set: the first two take the gathered
// chunk attention (kernels.AttendChunk's windows), the last the in-place
// kernels (PagedKV.First), so the windowed paths must agree: the
// last prompt token's logits within TestSynthArch2Golden's gemma3
// tolerances (0.05 with an F32 cache, 0.1 with an F16 one, whose rounding
// of queries and weights turns summation-order differences into F16 steps)
// and the same argmax. Without the window the logits move by far more,
// which the test checks too, so that it compares something.
func TestWindowPaths(t *testing.T) {
	prompt := invTokens(3, 70)
	run := func(b *Backend, chunk int) []float32 {
		r := newSeqRunner(0, (len(prompt)+b.cfg.BlockSize-1)/b.cfg.BlockSize)
		lg := make([]float32, b.m.HP.VocabSize)
		for r.pos < len(prompt) {
			toks := prompt[r.pos:min(len(prompt), r.pos+chunk)]
			var out []float32
			if r.pos+len(toks) == len(prompt) {
				out = lg
			}
			if err := b.Forward(t.Context(), []batch.SeqStep{{Seq: 1, Tokens: toks, Pos: r.pos, Blocks: r.blocks}}, [][]float32{out}); err != nil {
				t.Fatal(err)
			}
			r.pos += len(toks)
		}
		return lg
	}
	forEachKernelSet(t, func(t *testing.T, _ string) {
		for _, kv := range []struct {
			typ string
			tol float64
		}{{"f32", 0.05}, {"f16", 0.1}} {
			t.Run("kv"+kv.typ, func(t *testing.T) {
				m := loadModel(t, "synth/arch2/models/synth-gemma3-256-F32.gguf")
				b, err := New(m, Config{KVType: kv.typ, BlockSize: 16, NumBlocks: 16})
				if err != nil {
					t.Fatal(err)
				}
				want := run(b, 1)
				for _, chunk := range []int{70, 7} {
					got := run(b, chunk)
					d := maxAbs(got, want)
					if d > kv.tol {
						t.Errorf("chunks of %d: logits %.3g from token by token", chunk, d)
					}
					t.Logf("chunks of %d: logits %.3g from token by token", chunk, d)
					if g, w := sample.Argmax(got), sample.Argmax(want); g != w {
						t.Errorf("chunks of %d: argmax %d, token by token %d", chunk, g, w)
					}
				}
				for i := range m.Layers {
					m.Layers[i].Window = 0
				}
				d := maxAbs(run(b, 1), want)
				if d <= 1 {
					t.Errorf("without the window the logits moved by %.3g only: the window does not matter on this prompt", d)
				}
				t.Logf("without the window: logits %.3g from the windowed ones", d)
			})
		}
	})
}

// TestBatchInvariantWindow is TestBatchInvariantLogits for gemma3-256 F32
// (sliding windows, q/k and post norms, GELU, two rope bases): with
// kernels.SetBatchInvariant the target's logits are the same bits alone as
// in every batch of invConfigs, on each kernel set and KV type.
func TestBatchInvariantWindow(t *testing.T) {
	defer kernels.SetBatchInvariant(kernels.SetBatchInvariant(true))
	m := loadModel(t, "synth/arch2/models/synth-gemma3-256-F32.gguf")
	for _, kv := range []string{"f32", "f16"} {
		b, err := New(m, Config{KVType: kv, BlockSize: 16, NumBlocks: 128})
		if err != nil {
			t.Fatal(err)
		}
		for _, isa := range kernels.AvailableISAs() {
			t.Run(fmt.Sprintf("kv%s/%s", kv, isa), func(t *testing.T) {
				prev, err := kernels.UseISA(isa)
				if err != nil {
					t.Fatal(err)
				}
				defer kernels.UseISA(prev)
				want := invAlone(t, b)
				for _, cfg := range invConfigs {
					if d := invFirstDiff(invBatched(t, b, cfg), want); d != "" {
						t.Errorf("%d others, chunk %d, target %s: %s", cfg.others, cfg.chunk, cfg.pos, d)
					}
				}
			})
		}
	}
}
