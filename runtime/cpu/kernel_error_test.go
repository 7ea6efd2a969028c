package cpu

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/quant"
)

// TestForwardReturnsKernelFailure fails one matrix product of a step the
// way a C kernel does (kernels.ErrKernelMemory) and checks that Forward
// returns it, wrapped with the layer, instead of panicking; and that the
// backend then serves the same sequences as if nothing had happened.
func TestForwardReturnsKernelFailure(t *testing.T) {
	m := loadModel(t, "models/stories260K.gguf")
	b, err := New(m, Config{KVType: "f16", BlockSize: 8, NumBlocks: 32})
	if err != nil {
		t.Fatal(err)
	}
	V := m.HP.VocabSize
	prompt := []int32{1, 403, 407, 261, 378, 429, 324, 284, 297, 430, 372, 261}
	step := func() ([][]float32, error) {
		seqs := []batch.SeqStep{
			{Seq: 1, Tokens: prompt, Blocks: []int32{0, 1, 2}},
			{Seq: 2, Tokens: prompt[:5], Blocks: []int32{3, 4}},
		}
		logits := [][]float32{make([]float32, V), make([]float32, V)}
		return logits, b.Forward(context.Background(), seqs, logits)
	}
	want, err := step()
	if err != nil {
		t.Fatal(err)
	}
	for _, fail := range []string{"ffn_down", "output"} {
		t.Run(fail, func(t *testing.T) {
			wfail := m.Output
			if fail == "ffn_down" {
				wfail = m.Layers[len(m.Layers)-1].WDown
			}
			matMulHook = func(_ []float32, w quant.Weight, _ []float32, _ int) (bool, error) {
				if &w.Data[0] == &wfail.Data[0] {
					return false, kernels.ErrKernelMemory
				}
				return false, nil
			}
			_, err := step()
			matMulHook = nil
			if !errors.Is(err, kernels.ErrKernelMemory) || !errors.Is(err, kernels.ErrKernel) {
				t.Fatalf("Forward = %v, want an error wrapping kernels.ErrKernelMemory", err)
			}
			got, err := step()
			if err != nil {
				t.Fatalf("the step after the failure: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("logits after the failure differ (-before +after):\n%s", diff)
			}
		})
	}
}
