// weft.cu: the one translation unit nvcc compiles into kernels.fatbin (see
// scripts/cuda-build.sh). Kernels live in the headers it includes.
#include "common.cuh"
#include "dequant.cuh"
#include "layer.cuh"
#include "attention.cuh"
#include "gemv.cuh"
#include "sample.cuh"
