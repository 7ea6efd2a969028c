package cuda

import (
	"testing"
)

func TestErrors(t *testing.T) {
	tests := []struct {
		err    interface{ Sticky() bool }
		text   string
		sticky bool
	}{
		{&Error{Op: "cuMemAlloc", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"}, "cuda: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2)", false},
		{&Error{Op: "cuStreamSynchronize", Code: 700}, "cuda: cuStreamSynchronize: CUDA error (700)", true},
		{&Error{Op: "cuLaunchKernel", Code: 719, Name: "CUDA_ERROR_LAUNCH_FAILED"}, "cuda: cuLaunchKernel: CUDA_ERROR_LAUNCH_FAILED (719)", true},
		{&BLASError{Op: "cublasGemmEx", Status: 7}, "cuda: cublasGemmEx: CUBLAS_STATUS_INVALID_VALUE (7)", false},
		{&BLASError{Op: "cublasGemmEx", Status: 13}, "cuda: cublasGemmEx: CUBLAS_STATUS_EXECUTION_FAILED (13)", true},
	}
	for _, tc := range tests {
		e := tc.err.(error)
		if e.Error() != tc.text || tc.err.Sticky() != tc.sticky {
			t.Errorf("%#v: %q sticky %v, want %q sticky %v", tc.err, e.Error(), tc.err.Sticky(), tc.text, tc.sticky)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (&Config{Device: -1}).validate(); err == nil {
		t.Error("negative device: no error")
	}
	if err := (&Config{NoDefaultSearch: true}).validate(); err == nil {
		t.Error("NoDefaultSearch without LibDir: no error")
	}
	kv := KVConfig{}
	if err := kv.validate(); err != nil || kv.BlockSize != 16 || kv.MaxBatchTokens != 2048 || kv.MaxSeqs != 256 {
		t.Errorf("KVConfig defaults: %+v, %v", kv, err)
	}
	if err := (&KVConfig{Utilization: 1.5}).validate(); err == nil {
		t.Error("utilization 1.5: no error")
	}
	if err := (&KVConfig{NumBlocks: -1}).validate(); err == nil {
		t.Error("negative blocks: no error")
	}
}
