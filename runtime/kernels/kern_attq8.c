//go:build cgo

// kern_attq8.c: attention over a Q8_0 KV cache with AVX-512 VNNI: the
// AVX-512 kernel (body_attn.h) whose K scores are int8 dot products of the
// cache's rows and the queries quantized per 32 elements (WATT_VNNI; see
// aq8prep there). kernels.c takes it for head dims that are multiples of
// 64 on CPUs with VNNI; it defines watt_attend_q_vnni only.
#include <string.h>

#include "kernels.h"
#include "scratch.h"
#include "body_f16.h"

#if WEFT_X86
#include <immintrin.h>

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")

#include "body_kquant.h"
#define HAVE_F16C 1
#define WATT_VNNI 1
#define SFX _vnni
#define VW 16
#include "body_attn.h"
#endif
