// scratch.h: the per-thread scratch arena of the C kernels, owned by
// scratch.c. The translation units that need scratch (kern_gen.c,
// kern_avx2.c and kern_avx512.c for body_matmul.h; kern_vnni.c; kern_i8.c)
// include this header; nothing else reaches the arena's storage.
#ifndef WEFT_SCRATCH_H
#define WEFT_SCRATCH_H

// WEFT_SCRATCH_SLOTS: the buffers each thread has; a kernel uses slot 0 for
// its packed or quantized activations (or its tile), 1 and 2 for the packed
// GEMM's weight rows and transposed tiles.
#define WEFT_SCRATCH_SLOTS 3

// weft_scratch returns this thread's buffer number slot (0 <= slot <
// WEFT_SCRATCH_SLOTS) of at least n floats (64-byte aligned), or NULL when
// it cannot be allocated. A buffer grows and never shrinks; it lives as
// long as the thread, and its contents are undefined on return (a later
// call for the same slot may move it).
float *weft_scratch(int slot, long n);

// weft_scratch_bytes is the bytes the arena holds over all threads, and
// weft_scratch_threads the number of threads that have held a buffer.
long weft_scratch_bytes(void);
long weft_scratch_threads(void);

#endif
