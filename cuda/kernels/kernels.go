// Package kernels holds weft's CUDA kernels: the .cu/.cuh sources and the
// fatbin nvcc built from them (scripts/cuda-build.sh), embedded here so the
// Go binary carries its kernels and needs no toolkit to build or run.
//
// The fatbin holds SASS for sm_80, sm_86, sm_89 and sm_90 and compute_90
// PTX (JIT-compiled by the driver on newer GPUs). kernels.stamp records the
// sha256 of the sources it was built from; stamp_test.go fails when a source
// changed without a rebuild.
//
// Kernel entry points (extern "C"; names used with cuModuleGetFunction):
// dequant_f16, embed, rmsnorm_f16, add_bias, rope, kv_write, swiglu, add,
// attention, attention_reduce, argmax_logprob, gemv_f16.
package kernels

import (
	_ "embed"
	"strings"
)

// Fatbin is the CUDA fat binary, ready for cuModuleLoadData.
//
//go:embed kernels.fatbin
var Fatbin []byte

//go:embed kernels.stamp
var stamp string

// SourcesHash is the sha256 (hex) of the sources Fatbin was built from.
func SourcesHash() string { return stampField("sources") }

// NVCC is the nvcc release that built Fatbin.
func NVCC() string { return stampField("nvcc") }

func stampField(key string) string {
	for _, line := range strings.Split(stamp, "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			return v
		}
	}
	return ""
}
