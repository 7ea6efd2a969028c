//go:build cgo

// kern_avx512.c: the AVX-512 (F/BW/VL/DQ) kernel set, with AVX2, FMA and
// F16C. The whole unit is under the target pragma; Go runs it only where
// the CPU has these instructions (cpu.go).
#include <string.h>

#include "kernels.h"
#include "scratch.h"
#include "body_f16.h"

#if WEFT_X86
#include <immintrin.h>

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#define HAVE_F16C 1
#define SFX _avx512
#define VW 16
#define NRMAX 4
#define GMV 2
#define GNT 12
#define WATT_PR 6
#define WATT_PC 4
#define WATT_NV 4
#include "body_matmul.h"
#include "body_attn.h"
#endif
