package batch

import (
	"errors"
	"fmt"
	"testing"
)

func TestKVBytesPerBlock(t *testing.T) {
	for _, tc := range []struct {
		name                             string
		layers, kvDim, blockSize, elSize int
		want                             int64
	}{
		// Llama-3-8B, F16 cache, 16 positions: 2 x 32 x 16 x 1024 x 2 = 2 MiB.
		{"llama-3-8b f16", 32, 1024, 16, 2, 2 << 20},
		{"llama-3-8b f32", 32, 1024, 16, 4, 4 << 20},
		// 2 layers x kv dim 64 x 16 positions x K,V x f16 = 8 KiB.
		{"tiny", 2, 64, 16, 2, 8 << 10},
	} {
		if got := KVBytesPerBlock(tc.layers, tc.kvDim, tc.blockSize, tc.elSize); got != tc.want {
			t.Errorf("%s: KVBytesPerBlock = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestStepErrors(t *testing.T) {
	var err error = StepErrors{{Index: 1, Seq: 7, Err: ErrNonFinite}, {Index: 3, Seq: 9, Err: errors.New("boom")}}
	err = fmt.Errorf("step: %w", err)
	var se StepErrors
	if !errors.As(err, &se) {
		t.Fatalf("errors.As(%v, StepErrors) = false", err)
	}
	for i, want := range []bool{false, true, false, true} {
		if got := se.Failed(i); got != want {
			t.Errorf("Failed(%d) = %v, want %v", i, got, want)
		}
	}
	if !errors.Is(se[0], ErrNonFinite) {
		t.Errorf("SeqError does not unwrap to ErrNonFinite: %v", se[0])
	}
	if want := "sampling failed: sequence 7: non-finite logits; sequence 9: boom"; se.Error() != want {
		t.Errorf("Error() = %q, want %q", se.Error(), want)
	}
}
