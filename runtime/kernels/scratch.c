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
//
// Two rules keep what the arena holds equal to what it uses:
//   - A product takes the pooled set of lowest index that is free, so the
//     sets ever held are at most the products that ever ran at once. (A
//     set remembered per thread would let the indices creep upward: a
//     thread whose set is busy takes the next, remembers that one, and the
//     next thread that finds it busy takes the one after.)
//   - Buffers are mapped pages of their own (mmap), not the C allocator's:
//     a grown buffer's old pages go back to the system at once, where
//     malloc would keep them in the arena of whichever thread grew it.
#include <stdlib.h>
#include <sys/mman.h>

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

// weft_pages maps bytes (a multiple of the page size) of zeroed memory,
// NULL when the system has none.
static float *weft_pages(long bytes) {
	void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : (float *)p;
}

// weft_buf_bytes: the bytes a buffer of n floats maps, whole 4 KiB pages
// (the mapping's alignment is the page's, above the kernels' 64 bytes).
static long weft_buf_bytes(long n) { return (n * 4 + 4095) & ~4095L; }

void weft_scratch_begin(void) {
	for (int j = 0; j < WEFT_SCRATCH_SETS; j++) {
		int free_ = 0;
		if (__atomic_load_n(&weft_set_busy[j], __ATOMIC_RELAXED) == 0 &&
				__atomic_compare_exchange_n(&weft_set_busy[j], &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			if (!__atomic_exchange_n(&weft_set_used[j], 1, __ATOMIC_RELAXED))
				__atomic_add_fetch(&weft_scratch_nsets, 1, __ATOMIC_RELAXED);
			weft_cur = &weft_sets[j];
			weft_cur_idx = j;
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
		if (!s->buf[k]) continue;
		__atomic_sub_fetch(&weft_scratch_total, weft_buf_bytes(s->cap[k]), __ATOMIC_RELAXED);
		munmap(s->buf[k], (size_t)weft_buf_bytes(s->cap[k]));
	}
	free(s);
}

float *weft_scratch(int slot, long n) {
	weft_scratch_set *s = weft_cur;
	if (!s) return NULL;
	if (n > s->cap[slot]) {
		long old = 0;
		if (s->buf[slot]) {
			old = weft_buf_bytes(s->cap[slot]);
			munmap(s->buf[slot], (size_t)old);
		}
		long bytes = weft_buf_bytes(n);
		s->buf[slot] = weft_pages(bytes);
		s->cap[slot] = s->buf[slot] ? bytes / 4 : 0; // the whole pages are usable
		__atomic_add_fetch(&weft_scratch_total, (s->buf[slot] ? bytes : 0) - old, __ATOMIC_RELAXED);
	}
	return s->buf[slot];
}

long weft_scratch_bytes(void) { return __atomic_load_n(&weft_scratch_total, __ATOMIC_RELAXED); }

long weft_scratch_sets(void) { return __atomic_load_n(&weft_scratch_nsets, __ATOMIC_RELAXED); }

int weft_scratch_index(void) { return weft_cur ? weft_cur_idx : -1; }
