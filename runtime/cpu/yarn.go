package cpu

import (
	"math"

	"github.com/weft-inference/weft/runtime/llama"
)

// yarnRope is YaRN's rotation as ggml's CPU rope computes it
// (rope_yarn, ggml_rope_yarn_corr_dims), each operation rounded to
// float32 as there.
type yarnRope struct {
	freqScale float32 // 1/Factor
	ext       float32 // ext_factor
	low, high float32 // correction range, in dimension pairs
	mscale    float32 // the magnitude factor on cos and sin
}

// newYarnRope derives the rotation parameters for head dimension hd and
// rotary base base: the correction range is
// [floor(d(BetaFast)), ceil(d(BetaSlow))] clamped to [0, hd-1], with
// d(β) = hd·ln(OrigContextLen/(2πβ)) / (2 ln base); the magnitude is
// AttnFactor·(1 + 0.1·ln(1/freqScale)) when ExtFactor is not 0.
func newYarnRope(y llama.YaRN, hd int, base float32) *yarnRope {
	r := &yarnRope{freqScale: 1 / y.Factor, ext: y.ExtFactor, mscale: y.AttnFactor}
	dim := func(beta float32) float32 {
		num := logf(float32(y.OrigContextLen) / float32(float32(beta*2)*float32(math.Pi)))
		return float32(float32(hd)*num) / float32(2*logf(base))
	}
	r.low = max(0, float32(math.Floor(float64(dim(y.BetaFast)))))
	r.high = min(float32(hd-1), float32(math.Ceil(float64(dim(y.BetaSlow)))))
	if r.ext != 0 {
		r.mscale *= 1 + float32(float32(0.1)*logf(1/r.freqScale))
	}
	return r
}

// angle turns pair i's original angle theta into YaRN's angle and
// magnitude: the interpolated angle freqScale·theta, mixed with theta by
// ramp(i)·ext, where the ramp is 1 below the correction range, 0 above it
// and linear within.
func (r *yarnRope) angle(theta float32, i int) (float32, float32) {
	interp := r.freqScale * theta
	th := interp
	if r.ext != 0 {
		y := (float32(i) - r.low) / max(0.001, r.high-r.low)
		mix := (1 - min(1, max(0, y))) * r.ext
		th = float32(interp*(1-mix)) + float32(theta*mix)
	}
	return th, r.mscale
}

// logf is C's logf: the natural logarithm rounded to float32.
func logf(x float32) float32 { return float32(math.Log(float64(x))) }
