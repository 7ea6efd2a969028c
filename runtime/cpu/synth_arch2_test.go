package cpu

import "testing"

// TestSynthArch2Golden runs the random-weight models of shared/synth/arch2
// against llama.cpp de3ff81's goldens of the same files, with the checks of
// TestSynthGolden (teacher-forced, every step's top-5 logits within tol)
// and the rules of arch2/README.md:
//
//   - F32: token-exact (strict: every argmax is llama.cpp's, so the greedy
//     tokens are its own). qwen3 within 1e-3 as the other synth files;
//     gemma3 within 0.05: ggml's CPU GELU looks the gate up in an F16 table
//     (geluMul copies it), so a float32 summation-order difference that
//     moves a gate value across an F16 rounding boundary moves that
//     activation by a whole F16 step; the README's float64 reference, which
//     copies the table too, is 0.016 from the golden for the same reason.
//   - F16: token-exact except at golden near-ties (gaps <= 2·tol), tol 0.1;
//     gemma3 0.15: the README's float64 reference, teacher-forced, is
//     0.14-0.26 from the golden on this file (llama.cpp rounds each product's
//     input to F16, and the GELU table turns float32 rounding into F16
//     steps), and the kernel sets come within 0.08-0.12 by the order of
//     their attention sums alone (prompt chunks or token by token).
//   - Q8_0 (and IQ4): teacher-forced within an absolute tolerance of 3, 5.5
//     for gemma3 (the README's figures), with the golden argmax wherever
//     llama.cpp's gap exceeds 1.0, but for flips steps: llama.cpp rounds the
//     activations to 8 bits, and a rounding that lands on the other side
//     decides some steps. The README's float64 reference (exact
//     dequantization) misses 1 of 80 such steps on qwen3 Q8_0 (IQ4_NL 1/75,
//     IQ4_XS 2/82) and 1/78 on gemma3 Q8_0; our 8-bit-activation kernel sets
//     (avx2, avx512) measured up to 5 on gemma3 Q8_0, whose post-norm
//     weights (~12) and GELU table amplify such roundings, at gaps up to
//     3.2, far inside two tolerances (every logit compared is within 5.5).
//
// qwen3-256: head_dim 128 from attention.key_length (n_head·head_dim = 512
// != n_embd 256), per-head q/k RMS norms before NEOX RoPE, no biases,
// untied output. gemma3-256: embedding x16, q/k norms, post-attention and
// post-FFN norms, GELU(tanh), q scaled by 1/sqrt(key_length), sliding
// window 8 on layers 0-4 with rope base 1e4, layer 5 global with 1e6, tied
// output. TestSynthArch2Ablations shows that removing any of these breaks
// the F32 goldens.
//
// Run with every kernel set of the CPU.
func TestSynthArch2Golden(t *testing.T) {
	cases := []struct {
		preset, typ   string
		exact, strict bool
		tol           float64 // max abs logit difference
		flips         int     // argmax differences allowed at golden gaps > 1.0
	}{
		{"qwen3-256", "F32", true, true, 1e-3, 0},
		{"qwen3-256", "F16", true, false, 0.1, 0},
		{"qwen3-256", "Q8_0", false, false, 3, 1},
		{"qwen3-256", "IQ4_NL", false, false, 3, 1},
		// IQ4_XS: the int8 kernel sets round its activations per 256
		// columns, as ggml's Q8_K, and come within 1.13 of the golden with
		// no argmax difference; rounded per 32 (finer, but not llama.cpp's
		// rounding) they missed tolerance 3 (3.53-3.65). The float kernel
		// sets (go, c: exact activations) are 2.87 away.
		{"qwen3-256", "IQ4_XS", false, false, 3, 2},
		{"gemma3-256", "F32", true, true, 0.05, 0},
		{"gemma3-256", "F16", true, false, 0.15, 0},
		{"gemma3-256", "Q8_0", false, false, 5.5, 5},
	}
	forEachKernelSet(t, func(t *testing.T, _ string) {
		for _, c := range cases {
			t.Run(c.preset+"/"+c.typ, func(t *testing.T) {
				name := "synth-" + c.preset + "-" + c.typ
				checkSynthGoldenFlips(t, "synth/arch2/models/"+name+".gguf", "synth/arch2/golden/"+name+".json",
					"synth/arch2/golden/synth-"+c.preset+"-F32.json", c.exact, c.strict, c.tol, c.flips)
			})
			if c.preset != "gemma3-256" {
				continue
			}
			// The same goldens on a pool in layer groups whose window
			// groups give back the blocks that slid out of their window
			// (blocks of 4 positions: a window of 8 spans three rows).
			t.Run(c.preset+"/"+c.typ+"/sliding-kv", func(t *testing.T) {
				name := "synth-" + c.preset + "-" + c.typ
				checkSynthGoldenPool(t, Config{KVType: "f32", BlockSize: 4, NumBlocks: 32, SlidingKV: true},
					"synth/arch2/models/"+name+".gguf", "synth/arch2/golden/"+name+".json",
					"synth/arch2/golden/synth-"+c.preset+"-F32.json", c.exact, c.strict, c.tol, c.flips)
			})
		}
	})
}
