//go:build cgo

// kern_avx2.c: the AVX2 + FMA + F16C kernel set (every AVX2 CPU has F16C).
// The whole unit is under the target pragma; Go runs it only where the CPU
// has these instructions (cpu.go).
#include <string.h>

#include "kernels.h"
#include "scratch.h"
#include "body_f16.h"

#if WEFT_X86
#include <immintrin.h>

#pragma GCC target("avx2,fma,f16c")
#define HAVE_F16C 1
#define SFX _avx2
#define VW 8
#define NRMAX 3
#define GMV 2
#define GNT 6
#include "body_matmul.h"
#include "body_attn.h"
#endif
