// scratch.h: the scratch arena of the C kernels, owned by scratch.c. The
// translation units that need scratch (kern_gen.c, kern_avx2.c and
// kern_avx512.c for body_matmul.h; kern_vnni.c; kern_i8.c) include this
// header, and kernels.c, whose weft_matmul brackets every product with
// weft_scratch_begin/end; nothing else reaches the arena's storage.
#ifndef WEFT_SCRATCH_H
#define WEFT_SCRATCH_H

// WEFT_SCRATCH_SLOTS: the buffers of a set; a kernel uses slot 0 for its
// packed or quantized activations (or its tile), 1 and 2 for the packed
// GEMM's weight rows and transposed tiles.
#define WEFT_SCRATCH_SLOTS 3

// weft_scratch_begin gives the calling thread a set of buffers from the
// arena's pool until its weft_scratch_end, which returns the set. The two
// bracket one product, on one thread, with no other begin between them.
void weft_scratch_begin(void);
void weft_scratch_end(void);

// weft_scratch returns buffer number slot (0 <= slot < WEFT_SCRATCH_SLOTS)
// of the thread's current set, of at least n floats (64-byte aligned), or
// NULL when it cannot be allocated or no set is held. A buffer grows and
// never shrinks; its contents are undefined on return (a later call for the
// same slot may move it).
float *weft_scratch(int slot, long n);

// weft_scratch_bytes is the bytes the arena holds over all its sets, and
// weft_scratch_sets the number of sets (at most the products that ever
// ran at once).
long weft_scratch_bytes(void);
long weft_scratch_sets(void);

// weft_scratch_index is the pool index of the calling thread's current
// set: -1 for a set of its own (the pool all taken) or none held.
int weft_scratch_index(void);

#endif
