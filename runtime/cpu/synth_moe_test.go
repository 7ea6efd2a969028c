package cpu

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/kernels"

	"github.com/weft-inference/weft/runtime/llama"
)

// moeStats compares a model's teacher-forced run with a golden file of
// shared/synth/arch2: how many steps have every golden top-5 logit within
// tol, how many argmaxes equal the golden token (all steps, and where the
// golden top-1/top-2 gap exceeds 1), the worst first-step difference and
// the leading free-running tokens equal to the golden's (per prompt).
type moeStats struct {
	steps, within       int
	argmax              int
	bigGap, bigGapEqual int
	worstFirst, worst   float64
	leading             []int
	flips               []string // the argmax differences at gaps > 1
}

func (s moeStats) String() string {
	return fmt.Sprintf("top-5 within tol %d/%d, argmax %d/%d, at gap > 1 %d/%d, first-step max abs %.3g, worst %.3g, leading tokens %v",
		s.within, s.steps, s.argmax, s.steps, s.bigGapEqual, s.bigGap, s.worstFirst, s.worst, s.leading)
}

// synthMoEStats loads model (then edit, when not nil, changes it: the
// ablations) and measures it against golden.
func synthMoEStats(t *testing.T, model, golden string, tol float64, edit func(*llama.Model)) moeStats {
	t.Helper()
	m := loadModel(t, model)
	if edit != nil {
		edit(m)
	}
	g := readGolden(t, golden)
	b, err := New(m, Config{KVType: "f32", BlockSize: 16, NumBlocks: 16})
	if err != nil {
		t.Fatal(err)
	}
	var s moeStats
	for _, res := range g.Results {
		got, logits := greedy(t, b, res.PromptTokenIDs, len(res.GeneratedTokenIDs), res.GeneratedTokenIDs)
		s.worstFirst = max(s.worstFirst, maxAbs(logits[0], res.FirstStepLogits))
		lead := -1
		for i, st := range res.Steps {
			s.steps++
			ok := true
			for _, top := range st.Top {
				d := math.Abs(float64(logits[i][int(top[0])]) - top[1])
				s.worst = max(s.worst, d)
				ok = ok && d <= tol
			}
			if ok {
				s.within++
			}
			gap := st.Top[0][1] - st.Top[1][1]
			if got[i] == st.ID {
				s.argmax++
			} else if lead < 0 {
				lead = i
			}
			if gap > 1 {
				s.bigGap++
				if got[i] == st.ID {
					s.bigGapEqual++
				} else {
					s.flips = append(s.flips, fmt.Sprintf("%q step %d (gap %.3g)", res.Prompt, i, gap))
				}
			}
		}
		if lead < 0 {
			lead = len(res.Steps)
		}
		s.leading = append(s.leading, lead)
	}
	return s
}

// synthMoECases are the MoE files of shared/synth/arch2 weft loads, with
// what each must reach against llama.cpp's golden of the same file (see
// TestSynthMoEGolden). Adding a file is one line.
var synthMoECases = []struct {
	preset, typ string
	// exact: checkSynthGolden's token-exact check with tolerance tol.
	exact bool
	tol   float64
	// Otherwise agreement rates over the 96 teacher-forced steps: at
	// least within steps with every golden top-5 logit within tol, argmax
	// steps whose argmax is the golden token, and bigGap of those where
	// the golden top-1/top-2 gap exceeds 1.
	within, argmax, bigGap int
}{
	{preset: "qwen3moe-256", typ: "F32", exact: true, tol: 1e-3},
	// F16: ggml rounds each product's input to F16, which weft copies;
	// the summation order still differs, by far less than 0.1.
	{preset: "qwen3moe-256", typ: "F16", exact: true, tol: 0.1},
	// Quantized MoE files: llama.cpp rounds the products' inputs (Q8_0
	// activations for Q8_0 weights, Q8_K for K-quants), weft's kernels do
	// so only on some kernel sets (the integer kernels; "go" and "c" take
	// float activations), and a router logit moved across the top-2
	// boundary (margins of 0.001-0.017 along these runs, README
	// "routing_margins") swaps an expert and moves that step's logits by up
	// to ~50. So: agreement rates, at least those of the README's float64
	// reference that dequantizes exactly (qwen3moe Q8_0 88/96 and 77/84 at
	// gaps > 1; Q4_K_M 70/96 and 63/80), and most steps within 3.
	{preset: "qwen3moe-256", typ: "Q8_0", tol: 3, within: 85, argmax: 88, bigGap: 77},
	{preset: "qwen3moe-256", typ: "Q4_K_M", tol: 3, within: 58, argmax: 70, bigGap: 63},
	// gpt-oss F16: weft rounds the products' inputs to F16 as ggml does.
	{preset: "gptoss-256", typ: "F32", exact: true, tol: 1e-3},
	{preset: "gptoss-256", typ: "F16", exact: true, tol: 0.1},
	// gpt-oss Q8_0: the float64 reference reaches 86/96 and 74/80.
	{preset: "gptoss-256", typ: "Q8_0", tol: 3, within: 80, argmax: 86, bigGap: 74},
	// MXFP4_MOE (MXFP4 experts, Q8_0 elsewhere): the reference reaches
	// 81/96 and 75/82.
	{preset: "gptoss-256", typ: "MXFP4_MOE", tol: 3, within: 75, argmax: 81, bigGap: 75},
}

// TestSynthMoEGolden runs the mixture-of-experts models of
// shared/synth/arch2 (qwen3moe: qwen3's attention, 8 experts, top-2 of a
// softmax, renormalised; gpt-oss: biases, attention sinks, sliding window
// 8 on layers 0 and 2, YaRN, top-2 then softmax, clamped SwiGLU) against
// llama.cpp de3ff81's goldens, teacher-forced, on every kernel set: F32
// and F16 token-exact (checkSynthGolden: top-5 logits within tol, the
// golden argmax wherever the gap exceeds 2·tol), quantized files by the
// agreement rates of synthMoECases. TestSynthMoEAblations shows that each
// feature matters.
func TestSynthMoEGolden(t *testing.T) {
	forEachKernelSet(t, func(t *testing.T, _ string) {
		for _, c := range synthMoECases {
			t.Run(c.preset+"/"+c.typ, func(t *testing.T) {
				name := "synth-" + c.preset + "-" + c.typ
				model, golden := "synth/arch2/models/"+name+".gguf", "synth/arch2/golden/"+name+".json"
				if c.exact {
					checkSynthGolden(t, model, golden, "", true, false, c.tol)
					return
				}
				s := synthMoEStats(t, model, golden, c.tol, nil)
				t.Logf("%v", s)
				if s.within < c.within || s.argmax < c.argmax || s.bigGapEqual < c.bigGap {
					t.Errorf("agreement below the bounds (within %d, argmax %d, at gap > 1 %d): %v; argmax differences at gap > 1: %v",
						c.within, c.argmax, c.bigGap, s, s.flips)
				}
			})
		}
	})
}

// TestSynthMoEAblations removes one feature at a time from the loaded F32
// models (test-only edits of the Model) and requires llama.cpp's greedy
// tokens to be lost, at the step arch2/README.md's "Sensitivity" table
// gives (the leading tokens equal to the golden per prompt, measured there
// with llama.cpp on GGUF variants or the float64 reference): so the golden
// test passes only with each feature in place and right. Each ablation is
// the same change as the README's: renormalisation dropped (ref), sinks
// gone (README: set to -1000, whose exp is 0), window off (README: 4096,
// never reached), no YaRN (README: no rope.scaling keys: plain RoPE, no
// magnitude), the SwiGLU without its ±7 limits (ref).
func TestSynthMoEAblations(t *testing.T) {
	inf := float32(math.Inf(1))
	cases := []struct {
		preset, feature string
		edit            func(*llama.Model)
		wantLeading     []int
	}{
		{"qwen3moe-256", "top-2 renormalisation", func(m *llama.Model) { m.HP.MoE.Norm = false }, []int{2, 3, 0}},
		{"gptoss-256", "attention sinks", func(m *llama.Model) {
			for i := range m.Layers {
				m.Layers[i].Sinks = nil
			}
		}, []int{0, 0, 0}},
		{"gptoss-256", "YaRN", func(m *llama.Model) { m.HP.Yarn = nil }, []int{0, 0, 0}},
		{"gptoss-256", "sliding window", func(m *llama.Model) {
			for i := range m.Layers {
				m.Layers[i].Window = 0
			}
		}, []int{4, 4, 5}},
		{"gptoss-256", "SwiGLU clamp", func(m *llama.Model) { m.HP.MoE.SwiGLULimit = inf }, []int{5, 1, 1}},
	}
	for _, c := range cases {
		t.Run(c.preset+"/"+c.feature, func(t *testing.T) {
			name := "synth-" + c.preset + "-F32"
			s := synthMoEStats(t, "synth/arch2/models/"+name+".gguf", "synth/arch2/golden/"+name+".json", 1e-3, c.edit)
			t.Logf("without %s: %v", c.feature, s)
			if d := cmp.Diff(c.wantLeading, s.leading); d != "" {
				t.Errorf("without %s, leading tokens equal to the golden (-README +got):\n%s", c.feature, d)
			}
		})
	}
}

// TestMoEBatchInvariantLogits: with kernels.SetBatchInvariant, a sequence's
// logits through the MoE models are the same bits alone as inside every
// batch of invConfigs, whose other sequences' tokens share the step's
// expert products with it (every expert's rows of the whole step form one
// product, so its row count, and without invariance its kernel, depends
// on the batch) and are routed to experts it does not use
// (moeRoutingDiffers checks both on one step). Every kernel set for
// qwen3moe-Q8_0 (the int8 and float kernels); the best set for the other
// files; both KV types.
func TestMoEBatchInvariantLogits(t *testing.T) {
	defer kernels.SetBatchInvariant(kernels.SetBatchInvariant(true))
	isas := kernels.AvailableISAs()
	for _, name := range []string{"qwen3moe-256-Q8_0", "qwen3moe-256-F32", "qwen3moe-256-F16", "qwen3moe-256-Q4_K_M", "gptoss-256-F32", "gptoss-256-Q8_0", "gptoss-256-MXFP4_MOE"} {
		m := loadModel(t, "synth/arch2/models/synth-"+name+".gguf")
		for _, kv := range []string{"f32", "f16"} {
			b, err := New(m, Config{KVType: kv, BlockSize: 16, NumBlocks: 128})
			if err != nil {
				t.Fatal(err)
			}
			sets := isas[len(isas)-1:]
			if name == "qwen3moe-256-Q8_0" {
				sets = isas
			}
			for _, isa := range sets {
				t.Run(fmt.Sprintf("%s/kv%s/%s", name, kv, isa), func(t *testing.T) {
					prev, err := kernels.UseISA(isa)
					if err != nil {
						t.Fatal(err)
					}
					defer kernels.UseISA(prev)
					moeRoutingDiffers(t, b)
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
}

// moeRoutingDiffers runs one decode step of a target token beside 20
// other tokens and checks, on the last layer's routing, that the others
// use experts the target does not and share at least one with it.
func moeRoutingDiffers(t *testing.T, b *Backend) {
	t.Helper()
	var steps []batch.SeqStep
	var logits [][]float32
	for i := range 21 {
		toks := invTokens(300+i, 1)
		steps = append(steps, batch.SeqStep{Seq: uint64(i), Tokens: toks, Blocks: []int32{int32(i)}})
		logits = append(logits, nil)
	}
	if err := b.Forward(context.Background(), steps, logits); err != nil {
		t.Fatal(err)
	}
	K := b.m.HP.MoE.Used
	target := b.moe.sel[:K]
	elsewhere, shared := 0, 0
	for _, e := range b.moe.sel[K : 21*K] {
		if slices.Contains(target, e) {
			shared++
		} else {
			elsewhere++
		}
	}
	if elsewhere == 0 || shared == 0 {
		t.Fatalf("routing of the other 20 tokens: %d slots on the target's experts %v, %d elsewhere; want both", shared, target, elsewhere)
	}
}

// TestMoEBatchVariantLogitsDiffer: without SetBatchInvariant the same
// runs give the target other bits in some batch (its experts' products
// take other kernels as their row counts change), so
// TestMoEBatchInvariantLogits compares runs that can differ.
func TestMoEBatchVariantLogitsDiffer(t *testing.T) {
	defer kernels.SetBatchInvariant(kernels.SetBatchInvariant(false))
	for _, name := range []string{"qwen3moe-256-F32", "qwen3moe-256-Q8_0"} {
		t.Run(name, func(t *testing.T) {
			m := loadModel(t, "synth/arch2/models/synth-"+name+".gguf")
			b, err := New(m, Config{KVType: "f16", BlockSize: 16, NumBlocks: 128})
			if err != nil {
				t.Fatal(err)
			}
			want := invAlone(t, b)
			differ := 0
			for _, cfg := range invConfigs {
				if d := invFirstDiff(invBatched(t, b, cfg), want); d != "" {
					differ++
				}
			}
			if differ == 0 {
				t.Errorf("kernel set %s: every batch gave the target its bits alone without SetBatchInvariant; TestMoEBatchInvariantLogits would prove nothing", kernels.ISA())
			}
		})
	}
}
