package kernels

import "github.com/weft-inference/weft/runtime/quant"

// KVQ8Block is the number of consecutive elements of a Q8_0 KV cache that
// share one scale.
const KVQ8Block = 32

// QuantizeKVQ8 writes x (len(x) a multiple of KVQ8Block) as a Q8_0 cache
// holds it: for each block of 32 elements one scale d, the block's largest
// magnitude / 127 rounded to F16 (as ggml's q8_0 stores it), in
// d[i/32], and q[i] = round(x[i] * 127 / that magnitude) (the rounding of
// ggml's reference quantizer, with the scale before its F16 rounding). So
// the cache holds the values ggml's q8_0 cache would: q[i] * d[i/32].
func QuantizeKVQ8(q []int8, d []float32, x []float32) {
	if len(x)%KVQ8Block != 0 || len(q) < len(x) || len(d)*KVQ8Block < len(x) {
		panic("kernels: QuantizeKVQ8: bad lengths")
	}
	for b := 0; b < len(x); b += KVQ8Block {
		d[b/KVQ8Block] = quant.F16ToF32(quant.Q8_0Block(q[b:b+KVQ8Block], x[b:b+KVQ8Block]))
	}
}

// DequantizeKVQ8 sets dst[i] = float32(q[i]) * d[i/KVQ8Block] for i <
// len(dst): the floats the attention kernels read for a Q8_0 row that
// starts a block (q and d sliced at the row's element and its block).
func DequantizeKVQ8(dst []float32, q []int8, d []float32) {
	q = q[:len(dst)]
	for i, v := range q {
		dst[i] = float32(v) * d[i/KVQ8Block]
	}
}
