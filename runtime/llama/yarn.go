package llama

import (
	"fmt"
	"math"

	"github.com/weft-inference/weft/runtime/gguf"
)

// YaRN is YaRN rotary scaling (rope.scaling.type "yarn") with the
// parameters llama.cpp derives from the GGUF: the backend rotates by
// angles mixed between the interpolated (θ/Factor) and the original θ per
// dimension pair, and scales cos and sin by a magnitude factor (see
// runtime/cpu's ropeTable).
type YaRN struct {
	// Factor is rope.scaling.factor: the frequencies are interpolated by
	// 1/Factor (ggml's freq_scale).
	Factor float32
	// OrigContextLen is rope.scaling.original_context_length (default:
	// context_length), which sets the correction range.
	OrigContextLen int
	// BetaFast and BetaSlow bound the correction range (llama.cpp's
	// defaults 32 and 1; it reads no key for them in gpt-oss).
	BetaFast, BetaSlow float32
	// ExtFactor is the weight of the extrapolated angle in the ramp (1
	// for YaRN).
	ExtFactor float32
	// AttnFactor is llama.cpp's yarn_attn_factor: (1 + 0.1 ln Factor)
	// divided by itself (llama.cpp cancels the factor ggml's rope applies
	// again) times rope.scaling.attn_factor. The net magnitude on cos and
	// sin is AttnFactor·(1 + 0.1 ln Factor).
	AttnFactor float32
}

// readYaRN reads the yarn scaling keys of arch, as llama.cpp's
// llama_context does with default context parameters.
func readYaRN(f *gguf.File, arch string, contextLen int) (*YaRN, error) {
	y := &YaRN{Factor: 1, OrigContextLen: contextLen, BetaFast: 32, BetaSlow: 1, ExtFactor: 1}
	if v, ok := f.Float(arch + ".rope.scaling.factor"); ok && v != 0 {
		y.Factor = float32(v)
	}
	if !(y.Factor >= 1) || math.IsInf(float64(y.Factor), 0) {
		return nil, fmt.Errorf("llama: GGUF key %s.rope.scaling.factor = %g out of range", arch, y.Factor)
	}
	if v, ok := f.Uint(arch + ".rope.scaling.original_context_length"); ok {
		if v == 0 || v > 1<<24 {
			return nil, fmt.Errorf("llama: GGUF key %s.rope.scaling.original_context_length = %d out of range", arch, v)
		}
		y.OrigContextLen = int(v)
	}
	if v, ok := f.Float(arch + ".rope.scaling.yarn_log_multiplier"); ok && v != 0 {
		return nil, fmt.Errorf("%w: rope.scaling.yarn_log_multiplier %g", ErrUnsupported, v)
	}
	ropeAttn := float32(1)
	if v, ok := f.Float(arch + ".rope.scaling.attn_factor"); ok {
		ropeAttn = float32(v)
	}
	// llama_context: get_mscale(factor, 1) = 0.1·ln(factor) + 1 for
	// factor > 1, then multiplied by 1/(1 + 0.1·ln(factor)), then by
	// rope.scaling.attn_factor; each step rounded to float32.
	y.AttnFactor = 1
	if y.Factor > 1 {
		y.AttnFactor = float32(float32(0.1)*logf(y.Factor)) + 1
	}
	y.AttnFactor *= 1 / float32(1+float32(float32(0.1)*logf(y.Factor)))
	y.AttnFactor *= ropeAttn
	return y, nil
}

// logf is C's logf: the natural logarithm rounded to float32.
func logf(x float32) float32 { return float32(math.Log(float64(x))) }
