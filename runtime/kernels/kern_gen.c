//go:build cgo

// kern_gen.c: the portable kernel set (any CPU; the compiler vectorizes
// for its baseline: SSE2 on amd64, NEON on arm64).
#include <string.h>

#include "kernels.h"
#include "scratch.h"
#include "body_f16.h"

#define SFX _gen
#define VW 4
#define NRMAX 2
#define GMV 2
#define GNT 4
#include "body_matmul.h"
#include "body_attn.h"
