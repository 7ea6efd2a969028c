package cpu

import (
	"math"
	"testing"
)

// TestSynthGolden runs the random-weight synth-256 models of every type
// against llama.cpp (see shared/synth/README.md, "How close an engine can
// get"). F32 and F16: exact greedy tokens, logits close. Other types:
// teacher-forced (the golden tokens are fed back), each step's logits of
// llama.cpp's top-5 tokens within an absolute tolerance, and the golden
// argmax required where llama.cpp's top-1/top-2 gap exceeds 1.0.
func TestSynthGolden(t *testing.T) {
	cases := []struct {
		typ   string
		exact bool
		tol   float64 // max abs logit difference
	}{
		{"F32", true, 1e-3},
		{"F16", true, 0.1},
		{"BF16", false, 0.5},
		{"Q8_0", false, 3},
		{"Q4_0", false, 3},
		{"Q4_1", false, 3},
		{"Q5_0", false, 3},
		{"Q5_1", false, 3},
		{"Q2_K", false, 3},
		{"Q3_K_S", false, 3},
		{"Q4_K_S", false, 3},
		{"Q4_K_M", false, 3},
		{"Q5_K_M", false, 3},
		{"Q6_K", false, 3},
		{"Q2_K-mixed", false, 3},
		{"Q3_K_M-mixed", false, 3},
		{"Q4_K_M-mixed", false, 3},
	}
	for _, c := range cases {
		t.Run(c.typ, func(t *testing.T) {
			m := loadModel(t, "synth/models/synth-256-"+c.typ+".gguf")
			g := readGolden(t, "synth/golden/synth-256-"+c.typ+".json")
			b, err := New(m, Config{KVType: "f32", BlockSize: 16, NumBlocks: 16})
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for _, res := range g.Results {
				var forced []int32
				if !c.exact {
					forced = res.GeneratedTokenIDs
				}
				got, logits := greedy(t, b, res.PromptTokenIDs, len(res.GeneratedTokenIDs), forced)
				if d := maxAbs(logits[0], res.FirstStepLogits); d > c.tol {
					t.Errorf("%q: first-step logits max abs difference %.3g > %g", res.Prompt, d, c.tol)
				}
				for i, st := range res.Steps {
					for _, top := range st.Top {
						d := math.Abs(float64(logits[i][int(top[0])]) - top[1])
						worst = max(worst, d)
						if d > c.tol {
							t.Errorf("%q step %d: logit of token %d = %g, golden %g", res.Prompt, i, int(top[0]), logits[i][int(top[0])], top[1])
						}
					}
					gap := st.Top[0][1] - st.Top[1][1]
					if (c.exact || gap > 1.0) && got[i] != st.ID {
						t.Fatalf("%q step %d: argmax %d, golden %d (golden gap %.3g)", res.Prompt, i, got[i], st.ID, gap)
					}
				}
			}
			t.Logf("worst top-5 logit difference %.3g (tolerance %g)", worst, c.tol)
		})
	}
}
