//go:build cgo

// scratch.c: the owner of the per-thread scratch arena scratch.h declares.
// The buffers are thread-local, so kernels running on different threads
// (the Go pool's workers, each locked in its cgo call) never share one and
// need no lock. Two process-wide counters (atomic) say what the arena
// holds: its bytes and the threads that hold any.
#include <stdlib.h>

#include "scratch.h"

static __thread float *weft_tls_buf[WEFT_SCRATCH_SLOTS];
static __thread long weft_tls_cap[WEFT_SCRATCH_SLOTS];
static __thread int weft_tls_counted;

static long weft_scratch_total;
static long weft_scratch_nthreads;

float *weft_scratch(int slot, long n) {
	if (n > weft_tls_cap[slot]) {
		long old = weft_tls_cap[slot] > 0 ? (weft_tls_cap[slot] * 4 + 63) & ~63L : 0;
		free(weft_tls_buf[slot]);
		long bytes = (n * 4 + 63) & ~63L;
		weft_tls_buf[slot] = aligned_alloc(64, bytes);
		weft_tls_cap[slot] = weft_tls_buf[slot] ? n : 0;
		__atomic_add_fetch(&weft_scratch_total, (weft_tls_buf[slot] ? bytes : 0) - old, __ATOMIC_RELAXED);
		if (!weft_tls_counted && weft_tls_buf[slot]) {
			weft_tls_counted = 1;
			__atomic_add_fetch(&weft_scratch_nthreads, 1, __ATOMIC_RELAXED);
		}
	}
	return weft_tls_buf[slot];
}

long weft_scratch_bytes(void) { return __atomic_load_n(&weft_scratch_total, __ATOMIC_RELAXED); }

long weft_scratch_threads(void) { return __atomic_load_n(&weft_scratch_nthreads, __ATOMIC_RELAXED); }
