package cpu

import (
	"context"
	"errors"
	"testing"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/sample"
)

// TestDraftLogitsRows checks SeqStep.Draft: a row of the last token and k
// drafts yields k+1 logits rows, row j being the logits after the row's
// token j, as decoding the same tokens one per step gives them. With
// batch-invariant products the rows are the same bits; with the default
// products (whose kernel depends on the token count) they agree within
// float tolerance. Another sequence shares the step, without drafts.
func TestDraftLogitsRows(t *testing.T) {
	// Quantized products round their activations per kernel (see the
	// golden tests), so the Q8_0 rows get a looser tolerance.
	for _, c := range []struct {
		model string
		tol   float64
	}{{"models/stories260K.gguf", 1e-4}, {"models/stories260K-Q8_0.gguf", 5e-3}} {
		model := c.model
		for _, inv := range []bool{true, false} {
			t.Run(model, func(t *testing.T) {
				prev := kernels.SetBatchInvariant(inv)
				defer kernels.SetBatchInvariant(prev)
				m := loadModel(t, model)
				V := m.HP.VocabSize
				prompt := []int32{1, 403, 407, 261, 378}
				const k = 4
				// Reference: prompt, then one token per step, the greedy ones.
				ref, err := New(m, Config{BlockSize: 4, NumBlocks: 16})
				if err != nil {
					t.Fatal(err)
				}
				toks, want := greedy(t, ref, prompt, k+2, nil)
				// Drafted: prompt, then one row [toks[0], toks[1..k]] with Draft k
				// (all drafts right) beside a second sequence's prompt.
				b, err := New(m, Config{BlockSize: 4, NumBlocks: 16})
				if err != nil {
					t.Fatal(err)
				}
				blocks := []int32{0, 1, 2, 3}
				lg := make([]float32, V)
				if err := b.Forward(context.Background(), []batch.SeqStep{{Seq: 1, Tokens: prompt, Blocks: blocks, Logits: true}}, [][]float32{lg}); err != nil {
					t.Fatal(err)
				}
				row := append([]int32(nil), toks[:k+1]...)
				rows := make([]float32, (k+1)*V)
				other := make([]float32, V)
				seqs := []batch.SeqStep{
					{Seq: 1, Tokens: row, Pos: len(prompt), Blocks: blocks, Logits: true, Draft: k},
					{Seq: 2, Tokens: prompt[:3], Blocks: []int32{8, 9}, Logits: true},
				}
				if err := b.Forward(context.Background(), seqs, [][]float32{rows, other}); err != nil {
					t.Fatal(err)
				}
				for j := 0; j <= k; j++ {
					got := rows[j*V : (j+1)*V]
					w := want[j+1]
					if inv {
						for i := range got {
							if got[i] != w[i] {
								t.Fatalf("invariant: row %d logit %d = %v, one-per-step %v", j, i, got[i], w[i])
							}
						}
					} else if d := relL2(got, w); d > c.tol {
						t.Errorf("row %d: rel L2 %.3g from one-per-step logits", j, d)
					}
					if g := sample.Argmax(got); g != toks[j+1] {
						t.Errorf("row %d: argmax %d, want %d", j, g, toks[j+1])
					}
				}
			})
		}
	}
}

func TestDraftStepErrors(t *testing.T) {
	m := loadModel(t, "models/stories260K.gguf")
	V := m.HP.VocabSize
	b, err := New(m, Config{BlockSize: 4, NumBlocks: 8})
	if err != nil {
		t.Fatal(err)
	}
	if !b.DraftLogits() {
		t.Fatal("DraftLogits = false")
	}
	for _, tc := range []struct {
		name string
		s    batch.SeqStep
		slot []float32
	}{
		{"draft without logits", batch.SeqStep{Tokens: []int32{1, 2}, Blocks: []int32{0}, Draft: 1}, nil},
		{"all drafts", batch.SeqStep{Tokens: []int32{1, 2}, Blocks: []int32{0}, Draft: 2, Logits: true}, make([]float32, 3*V)},
		{"negative", batch.SeqStep{Tokens: []int32{1, 2}, Blocks: []int32{0}, Draft: -1, Logits: true}, make([]float32, V)},
		{"short slot", batch.SeqStep{Tokens: []int32{1, 2}, Blocks: []int32{0}, Draft: 1, Logits: true}, make([]float32, V)},
	} {
		err := b.Forward(context.Background(), []batch.SeqStep{tc.s}, [][]float32{tc.slot})
		if !errors.Is(err, ErrBadStep) {
			t.Errorf("%s: err = %v, want ErrBadStep", tc.name, err)
		}
	}
}
