//go:build cgo

// scratch.c: the owner of the scratch arena scratch.h declares. The arena
// is a pool of buffer sets: weft_matmul takes a set for the length of its
// call (weft_scratch_begin/end) and the kernels it runs reach that set's
// buffers through weft_scratch, so products on different threads never
// share a set and the kernels need no lock. A set returns to the pool at
// the call's end, so the arena holds as many sets as products ever ran at
// once (the worker pool's size, and the callers), however many OS threads
// the Go runtime has started and run a product on. Taking and returning a
// set is one atomic exchange each, no lock. Two counters say what it holds.
#include <stdlib.h>

#include "scratch.h"

// WEFT_SCRATCH_SETS: the pooled sets. More products at once than this (more
// callers than the worker pool has) get a set of their own, freed at the
// call's end.
#define WEFT_SCRATCH_SETS 64

typedef struct {
	float *buf[WEFT_SCRATCH_SLOTS];
	long cap[WEFT_SCRATCH_SLOTS];
} weft_scratch_set;

static weft_scratch_set weft_sets[WEFT_SCRATCH_SETS];
static int weft_set_busy[WEFT_SCRATCH_SETS]; // atomic: 1 while a product holds the set
static int weft_set_used[WEFT_SCRATCH_SETS]; // atomic: 1 once the set has been held
static long weft_scratch_nsets;              // atomic: sets ever held
static long weft_scratch_total;              // atomic: bytes of every set's buffers

static __thread weft_scratch_set *weft_cur; // the set held, NULL outside a product
static __thread int weft_cur_idx;           // its index, -1 for a set of its own
static __thread int weft_hint;              // the last pooled set this thread held

void weft_scratch_begin(void) {
	for (int i = 0; i < WEFT_SCRATCH_SETS; i++) {
		int j = (weft_hint + i) % WEFT_SCRATCH_SETS, free_ = 0;
		if (__atomic_load_n(&weft_set_busy[j], __ATOMIC_RELAXED) == 0 &&
				__atomic_compare_exchange_n(&weft_set_busy[j], &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			if (!__atomic_exchange_n(&weft_set_used[j], 1, __ATOMIC_RELAXED))
				__atomic_add_fetch(&weft_scratch_nsets, 1, __ATOMIC_RELAXED);
			weft_cur = &weft_sets[j];
			weft_cur_idx = weft_hint = j;
			return;
		}
	}
	weft_cur = calloc(1, sizeof(weft_scratch_set)); // NULL: out of memory, and weft_scratch says so
	weft_cur_idx = -1;
}

void weft_scratch_end(void) {
	weft_scratch_set *s = weft_cur;
	weft_cur = NULL;
	if (weft_cur_idx >= 0) {
		__atomic_store_n(&weft_set_busy[weft_cur_idx], 0, __ATOMIC_RELEASE);
		return;
	}
	if (!s) return;
	for (int k = 0; k < WEFT_SCRATCH_SLOTS; k++) {
		if (s->buf[k]) __atomic_sub_fetch(&weft_scratch_total, (s->cap[k] * 4 + 63) & ~63L, __ATOMIC_RELAXED);
		free(s->buf[k]);
	}
	free(s);
}

float *weft_scratch(int slot, long n) {
	weft_scratch_set *s = weft_cur;
	if (!s) return NULL;
	if (n > s->cap[slot]) {
		long old = s->cap[slot] > 0 ? (s->cap[slot] * 4 + 63) & ~63L : 0;
		free(s->buf[slot]);
		long bytes = (n * 4 + 63) & ~63L;
		s->buf[slot] = aligned_alloc(64, bytes);
		s->cap[slot] = s->buf[slot] ? n : 0;
		__atomic_add_fetch(&weft_scratch_total, (s->buf[slot] ? bytes : 0) - old, __ATOMIC_RELAXED);
	}
	return s->buf[slot];
}

long weft_scratch_bytes(void) { return __atomic_load_n(&weft_scratch_total, __ATOMIC_RELAXED); }

long weft_scratch_sets(void) { return __atomic_load_n(&weft_scratch_nsets, __ATOMIC_RELAXED); }
