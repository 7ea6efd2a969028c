//go:build cgo

// scratch.c: the owner of the per-thread scratch arena scratch.h declares.
// The buffers are thread-local, so kernels running on different threads
// (the Go pool's workers, each locked in its cgo call) never share one and
// need no lock.
#include <stdlib.h>

#include "scratch.h"

static __thread float *weft_tls_buf[WEFT_SCRATCH_SLOTS];
static __thread long weft_tls_cap[WEFT_SCRATCH_SLOTS];

float *weft_scratch(int slot, long n) {
	if (n > weft_tls_cap[slot]) {
		free(weft_tls_buf[slot]);
		long bytes = (n * 4 + 63) & ~63L;
		weft_tls_buf[slot] = aligned_alloc(64, bytes);
		weft_tls_cap[slot] = weft_tls_buf[slot] ? n : 0;
	}
	return weft_tls_buf[slot];
}
