package llama

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// MoEGen shapes a generated mixture-of-experts model (GenConfig.MoE):
// qwen3moe (q/k norms, softmax top-k renormalised) or gpt-oss (biases,
// sinks, sliding windows on even layers, YaRN, top-k then softmax, clamped
// SwiGLU), as GenConfig.Arch says.
type MoEGen struct {
	// Experts, Used and FFN are expert_count, expert_used_count and
	// expert_feed_forward_length.
	Experts, Used, FFN int
	// YarnFactor and YarnOrigContext are gpt-oss's rope.scaling.factor
	// and original_context_length (its rope.scaling.type is yarn).
	YarnFactor      float32
	YarnOrigContext int
}

// moePresets are the MoE shapes of Preset, with a generated 32000-token
// vocabulary as the dense 1B-class presets.
var moePresets = map[string]GenConfig{
	// Qwen3-30B-A3B's proportions (head_dim 128 = twice Dim/Heads, 4 KV
	// heads, 8 experts of a wide pool per token) scaled to about 1.5B
	// parameters in all and 0.3B used per token (MoEParamCounts); the
	// expert width is a multiple of 256 so that every gen-model type,
	// Q4_K_M's mix included, applies to every tensor.
	"qwen3moe-1.5b": {Name: "weft-qwen3moe-1.5b-shape", Arch: "qwen3moe", Dim: 1024, Layers: 14, Heads: 16, KVHeads: 4,
		HeadDim: 128, FFN: 3072, ContextLen: 4096, VocabSize: 32000, RopeBase: 1e6, Type: gguf.TypeF16, Seed: 30,
		MoE: &MoEGen{Experts: 64, Used: 8, FFN: 512}},
	// gpt-oss-20b's proportions (head_dim 64, 8 query heads per KV head,
	// 32 experts of which 4 run, expert width = Dim, sliding window 128 on
	// every other layer, YaRN with base 150000) scaled to about 1.5B in
	// all and 0.25B used per token.
	"gptoss-1.5b": {Name: "weft-gptoss-1.5b-shape", Arch: "gpt-oss", Dim: 1024, Layers: 14, Heads: 16, KVHeads: 2, FFN: 1024,
		ContextLen: 8192, VocabSize: 32000, RopeBase: 150000, Window: 128, Type: gguf.TypeF16, Seed: 20,
		MoE: &MoEGen{Experts: 32, Used: 4, FFN: 1024, YarnFactor: 8, YarnOrigContext: 1024}},
}

// MoEParamCounts returns the parameters of the model c describes and those
// one token uses (the output matrix and Used experts per layer; the
// embedding row lookup does not count).
func MoEParamCounts(c GenConfig) (total, active int64) {
	g := c.MoE
	hd := int64(c.Dim / c.Heads)
	if c.HeadDim != 0 {
		hd = int64(c.HeadDim)
	}
	d, v := int64(c.Dim), int64(c.VocabSize)
	attn := d*hd*int64(c.Heads)*2 + d*hd*int64(c.KVHeads)*2
	expert := 3 * d * int64(g.FFN)
	router := d * int64(g.Experts)
	total = int64(c.Layers)*(attn+router+int64(g.Experts)*expert) + 2*v*d
	active = int64(c.Layers)*(attn+router+int64(g.Used)*expert) + v*d
	return total, active
}

// validate checks the experts' shape (GenConfig.validate has checked the
// rest).
func (g *MoEGen) validate(c *GenConfig) error {
	if g.Experts <= 0 || g.Used <= 0 || g.Used > g.Experts || g.FFN <= 0 {
		return fmt.Errorf("llama: generate: MoE shape %+v", *g)
	}
	if g.FFN%c.Type.BlockLen() != 0 || c.MoreBitsQ6K && g.FFN%gguf.TypeQ6_K.BlockLen() != 0 ||
		c.ExpertsMXFP4 && (g.FFN%gguf.TypeMXFP4.BlockLen() != 0 || c.Dim%gguf.TypeMXFP4.BlockLen() != 0) {
		return fmt.Errorf("llama: generate: expert width %d is not a multiple of the %s block (%d)", g.FFN, c.Type, c.Type.BlockLen())
	}
	if c.TiedOutput {
		return fmt.Errorf("llama: generate: MoE models are written with an untied output")
	}
	if c.Arch == "gpt-oss" && (c.Window <= 0 || g.YarnFactor < 1 || g.YarnOrigContext <= 0) {
		return fmt.Errorf("llama: generate: gpt-oss needs a window and YaRN parameters: %+v", *g)
	}
	return nil
}

// generateMoE writes the MoE model c describes: the keys and tensors that
// convert_hf_to_gguf.py writes for the architecture (3-D stacked experts,
// an F32 router), random weights scaled as Generate's (the experts like
// its FFN, the router N(0, 4/Dim) so that routing is not uniform, biases
// N(0, 0.1²), sinks N(0, 1)).
func generateMoE(c GenConfig, w io.Writer) error {
	g := c.MoE
	if err := g.validate(&c); err != nil {
		return err
	}
	oai := c.Arch == "gpt-oss"
	arch := c.Arch
	gw := gguf.NewWriter()
	writeBaseKV(gw, c)
	hd := c.HeadDim // GenConfig.validate set it
	if !oai || hd*c.Heads != c.Dim {
		gw.AddKV(arch+".attention.key_length", uint32(hd))
		gw.AddKV(arch+".attention.value_length", uint32(hd))
	}
	eps := float32(1e-6)
	if oai {
		eps = 1e-5
		gw.AddKV(arch+".attention.sliding_window", uint32(c.Window))
		gw.AddKV(arch+".rope.scaling.type", "yarn")
		gw.AddKV(arch+".rope.scaling.factor", g.YarnFactor)
		gw.AddKV(arch+".rope.scaling.original_context_length", uint32(g.YarnOrigContext))
	}
	gw.AddKV(arch+".rope.freq_base", c.RopeBase)
	gw.AddKV(arch+".attention.layer_norm_rms_epsilon", eps)
	gw.AddKV(arch+".expert_count", uint32(g.Experts))
	gw.AddKV(arch+".expert_used_count", uint32(g.Used))
	gw.AddKV(arch+".expert_feed_forward_length", uint32(g.FFN))
	vocab, err := addVocab(gw, c)
	if err != nil {
		return err
	}

	rng := rand.New(rand.NewPCG(c.Seed, 0x7765667421))
	gauss := func(n int, std, mean float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(mean + rng.NormFloat64()*std)
		}
		return x
	}
	inv := func(n int) float64 { return 1 / math.Sqrt(float64(n)) }
	// mat adds a matrix (or n stacked ones: GGUF ne [cols, rows, n]).
	mat := func(name string, typ gguf.Type, n, rows, cols int, std float64) error {
		data, err := quant.Quantize(typ, gauss(n*rows*cols, std, 0), cols)
		if err != nil {
			return fmt.Errorf("llama: generate %s: %w", name, err)
		}
		dims := []uint64{uint64(cols), uint64(rows)}
		if n > 1 {
			dims = append(dims, uint64(n))
		}
		return gw.AddTensor(name, typ, dims, data)
	}
	vec := func(name string, dims []uint64, std, mean float64) error {
		n := 1
		for _, d := range dims {
			n *= int(d)
		}
		data, _ := quant.Quantize(gguf.TypeF32, gauss(n, std, mean), n)
		return gw.AddTensor(name, gguf.TypeF32, dims, data)
	}
	u := func(x ...int) []uint64 {
		out := make([]uint64, len(x))
		for i, v := range x {
			out[i] = uint64(v)
		}
		return out
	}
	qDim, kvDim, E, F := c.Heads*hd, c.KVHeads*hd, g.Experts, g.FFN
	if err := mat("token_embd.weight", c.Type, 1, vocab, c.Dim, 1); err != nil {
		return err
	}
	for l := range c.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		mats := []struct {
			name          string
			n, rows, cols int
			std           float64
		}{
			{"attn_q.weight", 1, qDim, c.Dim, 2 * inv(c.Dim)},
			{"attn_k.weight", 1, kvDim, c.Dim, 2 * inv(c.Dim)},
			{"attn_v.weight", 1, kvDim, c.Dim, inv(c.Dim)},
			{"attn_output.weight", 1, c.Dim, qDim, 0.5 * inv(qDim)},
			{"ffn_gate_exps.weight", E, F, c.Dim, inv(c.Dim)},
			{"ffn_up_exps.weight", E, F, c.Dim, inv(c.Dim)},
			{"ffn_down_exps.weight", E, c.Dim, F, 0.5 * inv(F)},
		}
		for _, m := range mats {
			typ := c.Type
			if c.MoreBitsQ6K && (m.name == "attn_v.weight" || m.name == "ffn_down_exps.weight") && useMoreBits(c, l) {
				typ = gguf.TypeQ6_K
			}
			if c.ExpertsMXFP4 && m.n > 1 {
				typ = gguf.TypeMXFP4
			}
			if err := mat(p+m.name, typ, m.n, m.rows, m.cols, m.std); err != nil {
				return err
			}
		}
		if err := mat(p+"ffn_gate_inp.weight", gguf.TypeF32, 1, E, c.Dim, 2*inv(c.Dim)); err != nil {
			return err
		}
		vecs := []struct {
			name      string
			dims      []uint64
			std, mean float64
		}{
			{"attn_norm.weight", u(c.Dim), 0.1, 1},
		}
		if oai {
			vecs = append(vecs, []struct {
				name      string
				dims      []uint64
				std, mean float64
			}{
				{"post_attention_norm.weight", u(c.Dim), 0.1, 1},
				{"attn_q.bias", u(qDim), 0.1, 0}, {"attn_k.bias", u(kvDim), 0.1, 0}, {"attn_v.bias", u(kvDim), 0.1, 0},
				{"attn_output.bias", u(c.Dim), 0.1, 0},
				{"attn_sinks.weight", u(c.Heads), 1, 0},
				{"ffn_gate_inp.bias", u(E), 0.1, 0},
				{"ffn_gate_exps.bias", u(F, E), 0.1, 0}, {"ffn_up_exps.bias", u(F, E), 0.1, 0},
				{"ffn_down_exps.bias", u(c.Dim, E), 0.1, 0},
			}...)
		} else {
			vecs = append(vecs, []struct {
				name      string
				dims      []uint64
				std, mean float64
			}{
				{"ffn_norm.weight", u(c.Dim), 0.1, 1},
				{"attn_q_norm.weight", u(hd), 0.1, 1}, {"attn_k_norm.weight", u(hd), 0.1, 1},
			}...)
		}
		for _, v := range vecs {
			if err := vec(p+v.name, v.dims, v.std, v.mean); err != nil {
				return err
			}
		}
	}
	if err := vec("output_norm.weight", u(c.Dim), 0.1, 1); err != nil {
		return err
	}
	outTyp := c.Type
	if c.MoreBitsQ6K {
		outTyp = gguf.TypeQ6_K
	}
	if err := mat("output.weight", outTyp, 1, vocab, c.Dim, 4*inv(c.Dim)); err != nil {
		return err
	}
	_, err = gw.WriteTo(w)
	return err
}

// useMoreBits is llama.cpp's use_more_bits(layer, layers): the layers whose
// attention V and FFN down take Q6_K in a Q4_K_M file.
func useMoreBits(c GenConfig, l int) bool {
	n := c.Layers
	return l < n/8 || l >= 7*n/8 || (l-n/8)%3 == 2
}
