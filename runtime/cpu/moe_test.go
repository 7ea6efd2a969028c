package cpu

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/llama"
	"github.com/weft-inference/weft/runtime/quant"
)

// moeTestModel builds a one-layer model holding only a random MoE FFN:
// dim D, E experts of hidden size F, K used, weights of type typ (the
// router stays F32, as in llama-quantize's files), with gpt-oss's biases
// and activation when oai.
func moeTestModel(t testing.TB, typ gguf.Type, D, F, E, K int, oai bool, seed uint64) *llama.Model {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	randn := func(n int, sd float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * sd)
		}
		return v
	}
	mat := func(typ gguf.Type, rows, cols int, sd float64) quant.Weight {
		data, err := quant.Quantize(typ, randn(rows*cols, sd), cols)
		if err != nil {
			t.Fatal(err)
		}
		return quant.Weight{Type: typ, Rows: rows, Cols: cols, Data: data}
	}
	hp := llama.HParams{Dim: D, Layers: 1, MoE: llama.MoEParams{Experts: E, Used: K, FFN: F, Gating: llama.GatingSoftmax, Norm: true}}
	ml := &llama.MoELayer{Router: mat(gguf.TypeF32, E, D, 2/math.Sqrt(float64(D)))}
	for range E {
		ml.Gate = append(ml.Gate, mat(typ, F, D, 3/math.Sqrt(float64(D))))
		ml.Up = append(ml.Up, mat(typ, F, D, 3/math.Sqrt(float64(D))))
		ml.Down = append(ml.Down, mat(typ, D, F, 1/math.Sqrt(float64(F))))
	}
	if oai {
		hp.MoE = llama.MoEParams{Experts: E, Used: K, FFN: F, Gating: llama.GatingTopKSoftmax, SwiGLUAlpha: 1.702, SwiGLULimit: 7}
		ml.RouterBias = randn(E, 0.5)
		for range E {
			ml.GateBias = append(ml.GateBias, randn(F, 0.5))
			ml.UpBias = append(ml.UpBias, randn(F, 0.5))
			ml.DownBias = append(ml.DownBias, randn(D, 0.5))
		}
	}
	return &llama.Model{HP: hp, Layers: []llama.Layer{{MoE: ml}}}
}

// mixTypes makes the up matrices of m's even experts typ (requantized
// from their values), so a step mixes weight types.
func mixTypes(t testing.TB, m *llama.Model, typ gguf.Type) {
	ml := m.Layers[0].MoE
	for e := 0; e < len(ml.Up); e += 2 {
		w := ml.Up[e]
		vals := make([]float32, w.Rows*w.Cols)
		for r := range w.Rows {
			dequantRow(w, r, vals[r*w.Cols:(r+1)*w.Cols])
		}
		data, err := quant.Quantize(typ, vals, w.Cols)
		if err != nil {
			t.Fatal(err)
		}
		ml.Up[e] = quant.Weight{Type: typ, Rows: w.Rows, Cols: w.Cols, Data: data}
	}
}

// moeRef is the plain per-token loop moeFFN must equal: for each token on
// its own, the router product, route, and for each slot in order the
// chosen expert's products of that one row, weighted and summed.
func moeRef(t testing.TB, m *llama.Model, total int, xn []float32) []float32 {
	t.Helper()
	mp, ml := m.HP.MoE, m.Layers[0].MoE
	D, E, K, F := m.HP.Dim, mp.Experts, mp.Used, mp.FFN
	var sc scratch
	sc.xr = make([]float32, max(D, F))
	out := make([]float32, total*D)
	lg, probs := make([]float32, E), make([]float32, E)
	sel, w := make([]int32, K), make([]float32, K)
	gate, up, y := make([]float32, F), make([]float32, F), make([]float32, D)
	for tk := range total {
		x := xn[tk*D : (tk+1)*D]
		if err := matMul(lg, ml.Router, x, 1, &sc); err != nil {
			t.Fatal(err)
		}
		if ml.RouterBias != nil {
			add(lg, ml.RouterBias)
		}
		route(mp, lg, sel, w, probs)
		o := out[tk*D : (tk+1)*D]
		for j, e := range sel {
			if err := matMul(gate, ml.Gate[e], x, 1, &sc); err != nil {
				t.Fatal(err)
			}
			if err := matMul(up, ml.Up[e], x, 1, &sc); err != nil {
				t.Fatal(err)
			}
			if ml.GateBias != nil {
				add(gate, ml.GateBias[e])
				add(up, ml.UpBias[e])
			}
			if mp.SwiGLULimit != 0 {
				swigluOAI(gate, up, mp.SwiGLUAlpha, mp.SwiGLULimit)
			} else {
				siluMul(gate, up)
			}
			if err := matMul(y, ml.Down[e], gate, 1, &sc); err != nil {
				t.Fatal(err)
			}
			if ml.DownBias != nil {
				add(y, ml.DownBias[e])
			}
			for c := range y {
				v := y[c] * w[j]
				if j == 0 {
					o[c] = v
				} else {
					o[c] += v
				}
			}
		}
	}
	return out
}

func runMoE(t testing.TB, m *llama.Model, total int, xn []float32) []float32 {
	t.Helper()
	b := &Backend{m: m}
	b.grow(total, 0)
	out := make([]float32, total*m.HP.Dim)
	if err := b.moeFFN(0, &m.Layers[0], total, xn, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func moeInput(total, D int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 2))
	x := make([]float32, total*D)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// moeTol bounds the relative L2 difference between the grouped FFN and
// the per-token loop without kernels.SetBatchInvariant: summation order for
// F32; for F16 that order also moves the F16 rounding of the down
// product's inputs; Q8_0 rows take integer products on int8-rounded
// activations for few tokens and float ones for many (runtime/kernels' doc,
// "Activation rounding"), which differ by up to about 1/254 of the
// activations' scale per term.
var moeTol = map[gguf.Type]float64{gguf.TypeF32: 1e-5, gguf.TypeF16: 1e-4, gguf.TypeQ8_0: 3e-2}

// TestMoEFFNMatchesPerTokenLoop: the expert-grouped FFN equals the plain
// per-token loop, bit for bit with kernels.SetBatchInvariant (every product
// then treats its rows alike, so grouping cannot show), and within the
// kernels' summation-order differences without it (the grouped products
// run the many-token kernels), for steps of 1 to 200 tokens (an expert
// then sees up to about 50: every kernel threshold), qwen3moe's and
// gpt-oss's gating and activation, F32, F16 and Q8_0 experts, on every
// kernel set.
func TestMoEFFNMatchesPerTokenLoop(t *testing.T) {
	const D, F, E, K = 256, 128, 8, 2
	forEachKernelSet(t, func(t *testing.T, _ string) {
		for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0} {
			for _, oai := range []bool{false, true} {
				m := moeTestModel(t, typ, D, F, E, K, oai, 7)
				mixed := ""
				if typ == gguf.TypeF16 && oai {
					// F16 gate and down beside Q8_0 up in half the experts:
					// the grouped products round their F16 inputs after
					// the others have read them.
					mixTypes(t, m, gguf.TypeQ8_0)
					mixed = "+Q8_0"
				}
				// 300 tokens route 600 rows: more than the gathered
				// buffers hold beyond the step's tokens, so the experts
				// run in several groups.
				for _, total := range []int{1, 3, 17, 64, 200, 300} {
					t.Run(fmt.Sprintf("%s%s/oai=%v/%d", typ, mixed, oai, total), func(t *testing.T) {
						xn := moeInput(total, D, uint64(total))
						want := moeRef(t, m, total, xn)
						prev := kernels.SetBatchInvariant(true)
						got := runMoE(t, m, total, xn)
						kernels.SetBatchInvariant(prev)
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("batch-invariant: out[%d] (token %d) = %v, per-token loop %v", i, i/D, got[i], want[i])
							}
						}
						prev = kernels.SetBatchInvariant(false)
						got = runMoE(t, m, total, xn)
						kernels.SetBatchInvariant(prev)
						tol := moeTol[typ]
						if mixed != "" {
							tol = moeTol[gguf.TypeQ8_0]
						}
						if e := relL2(got, want); e > tol {
							t.Errorf("relative L2 difference %.3g from the per-token loop > %g", e, tol)
						}
					})
				}
			}
		}
	})
}

// TestMoEFFNGroupingInvariant: with kernels.SetBatchInvariant, a token's
// output is the same bits alone and inside a step whose other tokens are
// routed to other experts (or the same ones), in any position.
func TestMoEFFNGroupingInvariant(t *testing.T) {
	defer kernels.SetBatchInvariant(kernels.SetBatchInvariant(true))
	const D, F, E, K = 256, 128, 8, 2
	for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0} {
		t.Run(typ.String(), func(t *testing.T) {
			m := moeTestModel(t, typ, D, F, E, K, false, 11)
			x := moeInput(1, D, 99)
			alone := runMoE(t, m, 1, x)
			for _, n := range []int{2, 9, 40, 150} {
				for _, at := range []int{0, n / 2, n - 1} {
					xs := moeInput(n, D, uint64(n))
					copy(xs[at*D:(at+1)*D], x)
					got := runMoE(t, m, n, xs)[at*D : (at+1)*D]
					if d := cmp.Diff(alone, got); d != "" {
						t.Errorf("%d tokens, target at %d: output differs from alone (-alone +batch):\n%s", n, at, d)
					}
				}
			}
		})
	}
}

// TestRoute checks the gating against float64 arithmetic on hand-made
// logits: qwen3moe's softmax, top-k and renormalisation (and without the
// renormalisation), gpt-oss's top-k then softmax over the chosen logits.
func TestRoute(t *testing.T) {
	lg := []float32{0.5, 2, -1, 1.5, 3, 0, 1.5, -2}
	softmax := func(x []float64) []float64 {
		mx := math.Inf(-1)
		for _, v := range x {
			mx = max(mx, v)
		}
		var s float64
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = math.Exp(v - mx)
			s += out[i]
		}
		for i := range out {
			out[i] /= s
		}
		return out
	}
	all := make([]float64, len(lg))
	for i, v := range lg {
		all[i] = float64(v)
	}
	p := softmax(all)
	cases := []struct {
		name    string
		mp      llama.MoEParams
		k       int
		wantSel []int32
		wantW   []float64
	}{
		{"softmax-norm", llama.MoEParams{Gating: llama.GatingSoftmax, Norm: true}, 2, []int32{4, 1}, softmax([]float64{3, 2})},
		{"softmax", llama.MoEParams{Gating: llama.GatingSoftmax}, 2, []int32{4, 1}, []float64{p[4], p[1]}},
		// 1.5 appears twice: the lower index wins.
		{"softmax-norm-ties", llama.MoEParams{Gating: llama.GatingSoftmax, Norm: true}, 4, []int32{4, 1, 3, 6}, softmax([]float64{3, 2, 1.5, 1.5})},
		{"topk-softmax", llama.MoEParams{Gating: llama.GatingTopKSoftmax}, 3, []int32{4, 1, 3}, softmax([]float64{3, 2, 1.5})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sel, w := make([]int32, c.k), make([]float32, c.k)
			route(c.mp, append([]float32(nil), lg...), sel, w, make([]float32, len(lg)))
			if d := cmp.Diff(c.wantSel, sel); d != "" {
				t.Errorf("selection (-want +got):\n%s", d)
			}
			got := make([]float64, len(w))
			for i, v := range w {
				got[i] = float64(v)
			}
			if d := cmp.Diff(c.wantW, got, cmpopts.EquateApprox(1e-6, 0)); d != "" {
				t.Errorf("weights (-want +got):\n%s", d)
			}
		})
	}
}

// TestSwiGLUOAI checks gpt-oss's clamped SwiGLU against float64 on both
// sides of the limits.
func TestSwiGLUOAI(t *testing.T) {
	for _, c := range []struct{ g, u float32 }{{0, 0}, {1, 1}, {-3, 2}, {6.9, -6.9}, {7.5, 8}, {20, -20}, {-20, 0.5}} {
		gate, up := []float32{c.g}, []float32{c.u}
		swigluOAI(gate, up, 1.702, 7)
		g := math.Min(float64(c.g), 7)
		u := math.Max(math.Min(float64(c.u), 7), -7)
		want := g / (1 + math.Exp(-1.702*g)) * (u + 1)
		if math.Abs(float64(gate[0])-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("swigluOAI(%v, %v) = %v, want %v", c.g, c.u, gate[0], want)
		}
	}
}

// TestGeneratedMoEForward runs tiny models that llama.Generate writes for
// each MoE architecture (the gen-model presets' layout at a test's scale):
// they load, their logits are finite, and a prompt fed whole gives the
// same bits, with kernels.SetBatchInvariant, as fed one token per step
// (the KV cache, the window and the experts see the same rows either way).
func TestGeneratedMoEForward(t *testing.T) {
	defer kernels.SetBatchInvariant(kernels.SetBatchInvariant(true))
	for _, arch := range []string{"qwen3moe", "gpt-oss"} {
		for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0} {
			t.Run(arch+"/"+typ.String(), func(t *testing.T) {
				c := llama.GenConfig{Name: "tiny-" + arch, Arch: arch, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 96,
					ContextLen: 256, VocabSize: 300, Type: typ, Seed: 5, MoE: &llama.MoEGen{Experts: 4, Used: 2, FFN: 32}}
				if arch == "qwen3moe" {
					c.HeadDim = 32
				} else {
					c.Window, c.MoE.YarnFactor, c.MoE.YarnOrigContext = 4, 4, 16
				}
				var buf bytes.Buffer
				if err := llama.Generate(c, &buf); err != nil {
					t.Fatal(err)
				}
				f, err := gguf.Parse(buf.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				m, err := llama.FromGGUF(f)
				if err != nil {
					t.Fatal(err)
				}
				b, err := New(m, Config{KVType: "f32", BlockSize: 16, NumBlocks: 8})
				if err != nil {
					t.Fatal(err)
				}
				prompt := []int32{1, 40, 77, 123, 9, 250, 31, 64, 200, 17}
				whole := make([]float32, m.HP.VocabSize)
				st := batch.SeqStep{Seq: 1, Tokens: prompt, Blocks: []int32{0}}
				if err := b.Forward(context.Background(), []batch.SeqStep{st}, [][]float32{whole}); err != nil {
					t.Fatal(err)
				}
				var step []float32
				for i, tok := range prompt {
					step = make([]float32, m.HP.VocabSize)
					st := batch.SeqStep{Seq: 2, Tokens: []int32{tok}, Pos: i, Blocks: []int32{1}}
					if err := b.Forward(context.Background(), []batch.SeqStep{st}, [][]float32{step}); err != nil {
						t.Fatal(err)
					}
				}
				for i, v := range whole {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("logit %d = %v", i, v)
					}
				}
				if d := cmp.Diff(whole, step); d != "" {
					t.Errorf("prompt whole vs one token per step (-whole +steps):\n%s", d)
				}
			})
		}
	}
}

// BenchmarkMoEFFN times the expert-grouped FFN of one layer shaped as
// gen-model's qwen3moe-1.5b (1024 wide, 64 experts of 512, 8 used) for a
// decode token, a batch of 16 decode tokens and a 128-token prompt chunk.
func BenchmarkMoEFFN(b *testing.B) {
	const D, F, E, K = 1024, 512, 64, 8
	for _, typ := range []gguf.Type{gguf.TypeF16, gguf.TypeQ8_0} {
		m := moeTestModel(b, typ, D, F, E, K, false, 3)
		for _, total := range []int{1, 16, 128} {
			b.Run(fmt.Sprintf("%s/tokens=%d", typ, total), func(b *testing.B) {
				be := &Backend{m: m}
				be.grow(total, 0)
				xn, out := moeInput(total, D, 1), make([]float32, total*D)
				for b.Loop() {
					if err := be.moeFFN(0, &m.Layers[0], total, xn, out); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}
