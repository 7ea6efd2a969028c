package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/weft-inference/weft/runtime/gguf"
)

// Quantize encodes src (a whole number of rows of cols values) as type t:
// F32, F16, Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL or MXFP4 (quantize_iq4.go), in
// the block layouts Dequantize decodes. The encoders round to nearest (no
// importance search or scale refit, unlike llama.cpp's quantize tool):
// enough for generated test models, whose weights are random anyway. Other types give an error wrapping ErrType;
// src not made of whole rows, one wrapping ErrSize.
func Quantize(t gguf.Type, src []float32, cols int) ([]byte, error) {
	if cols <= 0 || len(src)%cols != 0 {
		return nil, fmt.Errorf("%w: quantize: %d values are not rows of %d", ErrSize, len(src), cols)
	}
	rb, err := t.RowBytes(cols)
	if err != nil {
		return nil, fmt.Errorf("%w: quantize: %v", ErrSize, err)
	}
	rows := len(src) / cols
	out := make([]byte, rows*rb)
	var enc func(dst []byte, x []float32)
	bl := t.BlockLen()
	switch t {
	case gguf.TypeF32:
		enc = func(dst []byte, x []float32) { binary.LittleEndian.PutUint32(dst, math.Float32bits(x[0])) }
	case gguf.TypeF16:
		enc = func(dst []byte, x []float32) { binary.LittleEndian.PutUint16(dst, F32ToF16(x[0])) }
	case gguf.TypeQ8_0:
		enc = quantQ8_0
	case gguf.TypeQ4_0:
		enc = quantQ4_0
	case gguf.TypeQ5_0:
		enc = quantQ5_0
	case gguf.TypeQ5_1:
		enc = quantQ5_1
	case gguf.TypeQ4_K:
		enc = quantQ4_K
	case gguf.TypeQ5_K:
		enc = quantQ5_K
	case gguf.TypeQ6_K:
		enc = quantQ6_K
	case gguf.TypeIQ4_NL:
		enc = quantIQ4_NL
	case gguf.TypeIQ4_XS:
		enc = quantIQ4_XS
	case gguf.TypeMXFP4:
		enc = quantMXFP4
	default:
		return nil, fmt.Errorf("%w: no encoder for %s", ErrType, t)
	}
	bs := t.BlockSize()
	for i := 0; i < len(src)/bl; i++ {
		enc(out[i*bs:(i+1)*bs], src[i*bl:(i+1)*bl])
	}
	return out, nil
}

func quantQ8_0(dst []byte, x []float32) {
	var q [32]int8
	binary.LittleEndian.PutUint16(dst, Q8_0Block(q[:len(x)], x))
	for i, v := range q[:len(x)] {
		dst[2+i] = byte(v)
	}
}

// Q8_0Block quantizes one Q8_0 block of x as ggml's reference does: the
// scale is max|x| / 127, q[i] = round(x[i] / scale) (computed with the
// scale before its F16 rounding); it returns the scale as F16, what the
// block stores.
func Q8_0Block(q []int8, x []float32) uint16 {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	for i, v := range x {
		q[i] = int8(math.Round(float64(v * id)))
	}
	return F32ToF16(d)
}

// signedScale returns the scale d of a block whose value of largest
// magnitude maps to the code of div (a negative level: that value takes the
// lowest code exactly), and 1/d (0 for an all-zero block).
func signedScale(x []float32, div float32) (d, id float32) {
	var amax, mx float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, mx = a, v
		}
	}
	d = mx / div
	if d != 0 {
		id = 1 / d
	}
	return d, id
}

func quantQ4_0(dst []byte, x []float32) {
	d, id := signedScale(x, -8)
	binary.LittleEndian.PutUint16(dst, F32ToF16(d))
	q := func(v float32) byte { return byte(min(15, max(0, int(v*id+8.5)))) }
	for j := range 16 {
		dst[2+j] = q(x[j]) | q(x[j+16])<<4
	}
}

// quantQ5_0 writes one Q5_0 block: the f16 scale d, 32 high bits (bit j
// for value j), then 16 bytes of low nibbles (value j low, value j+16
// high); value = (q - 16) * d with q in 0..31. d is the signed value of
// largest magnitude over -16, so that value maps exactly to q = 0.
func quantQ5_0(dst []byte, x []float32) {
	d, id := signedScale(x, -16)
	binary.LittleEndian.PutUint16(dst, F32ToF16(d))
	q := func(v float32) uint32 { return uint32(min(31, max(0, int(v*id+16.5)))) }
	binary.LittleEndian.PutUint32(dst[2:], packQ5(dst[6:22], x, q))
}

// packQ5 writes the 5-bit quants q(x[j]) of a 32-value block as Q5_0 and
// Q5_1 store them: value j's low four bits in the low nibble of qs[j%16]
// (j < 16) or its high nibble, and returns the fifth bits (value j's at
// bit j).
func packQ5(qs []byte, x []float32, q func(float32) uint32) uint32 {
	var qh uint32
	for j := range 16 {
		lo, hi := q(x[j]), q(x[j+16])
		qs[j] = byte(lo&0xf | (hi&0xf)<<4)
		qh |= (lo>>4)<<j | (hi>>4)<<(j+16)
	}
	return qh
}

// quantQ5_1 encodes 32 values as d, m (F16), qh (the fifth bits, value j
// at bit j) and 16 bytes of nibbles (values j and j+16): x = d*q + m, q
// in 0..31.
func quantQ5_1(dst []byte, x []float32) {
	lo, hi := x[0], x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	d := (hi - lo) / 31
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(dst, F32ToF16(d))
	binary.LittleEndian.PutUint16(dst[2:], F32ToF16(lo))
	q := func(v float32) uint32 { return uint32(min(31, max(0, int((v-lo)*id+0.5)))) }
	binary.LittleEndian.PutUint32(dst[4:], packQ5(dst[8:24], x, q))
}

func quantQ4_K(dst []byte, x []float32) { quantKMin(dst, dst[16:], nil, x, 15) }

// quantQ5_K encodes 256 values as Q4_K's super-block with a fifth bit per
// value: d, dmin, the 12 scale bytes, qh[32] (bit s of qh[l] is the fifth
// bit of value l of sub-block s), then Q4_K's 128 nibble bytes.
func quantQ5_K(dst []byte, x []float32) { quantKMin(dst, dst[48:], dst[16:48], x, 31) }

// quantKMin encodes the 256 values x as Q4_K (top 15: qh nil) or Q5_K (top
// 31): eight sub-blocks of 32, each with a 6-bit scale of d and a 6-bit
// min of dmin, and quants 0..top; the low nibbles go to qs (sub-blocks 2j
// and 2j+1 share 32 bytes, low and high nibble), the fifth bits to qh.
func quantKMin(dst, qs, qh []byte, x []float32, top float32) {
	var scales, mins [8]float32
	for s := range 8 {
		sub := x[32*s : 32*s+32]
		lo, hi := float32(0), float32(0)
		for i, v := range sub {
			if i == 0 || v < lo {
				lo = v
			}
			if i == 0 || v > hi {
				hi = v
			}
		}
		lo = min(lo, 0)
		scales[s] = (hi - lo) / top
		mins[s] = -lo
	}
	var maxSc, maxMin float32
	for s := range 8 {
		maxSc, maxMin = max(maxSc, scales[s]), max(maxMin, mins[s])
	}
	d := RoundF16(maxSc / 63)
	dmin := RoundF16(maxMin / 63)
	var sc, mn [8]uint8
	for s := range 8 {
		if d > 0 {
			sc[s] = uint8(min(63, math.Round(float64(scales[s]/d))))
		}
		if dmin > 0 {
			mn[s] = uint8(min(63, math.Ceil(float64(mins[s]/dmin))))
		}
	}
	binary.LittleEndian.PutUint16(dst[0:], F32ToF16(d))
	binary.LittleEndian.PutUint16(dst[2:], F32ToF16(dmin))
	p := dst[4:16]
	for j := range 4 {
		p[j] = sc[j]&63 | (sc[j+4]>>4)<<6
		p[j+4] = mn[j]&63 | (mn[j+4]>>4)<<6
		p[j+8] = sc[j+4]&0xf | (mn[j+4]&0xf)<<4
	}
	for s := range 8 {
		scale := d * float32(sc[s])
		off := dmin * float32(mn[s])
		for i := range 32 {
			var q int
			if scale > 0 {
				q = int(math.Round(float64((x[32*s+i] + off) / scale)))
			}
			q = min(int(top), max(0, q))
			j := s / 2 * 32
			if s%2 == 0 {
				qs[j+i] |= byte(q & 0xf)
			} else {
				qs[j+i] |= byte(q&0xf) << 4
			}
			if qh != nil {
				qh[i] |= byte(q>>4) << s
			}
		}
	}
}

// quantQ6_K encodes 256 values: 16 sub-blocks of 16, each with a signed
// 8-bit scale (of the super-block scale d) and 6-bit quants stored as
// q + 32, split into low nibbles (ql) and high bit pairs (qh) in ggml's
// order.
func quantQ6_K(dst []byte, x []float32) {
	var scales [16]float32
	var maxAbs float32
	for s := range 16 {
		var amax, mx float32
		for _, v := range x[16*s : 16*s+16] {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		scales[s] = mx / -32 // the largest magnitude maps to -32
		maxAbs = max(maxAbs, float32(math.Abs(float64(scales[s]))))
	}
	d := RoundF16(maxAbs / 127)
	var sc [16]int8
	var q [256]uint8
	for s := range 16 {
		if d > 0 {
			sc[s] = int8(max(-128, min(127, math.Round(float64(scales[s]/d)))))
		}
		scale := d * float32(sc[s])
		for i := range 16 {
			v := 0
			if scale != 0 {
				v = int(math.Round(float64(x[16*s+i] / scale)))
			}
			q[16*s+i] = uint8(min(31, max(-32, v)) + 32)
		}
	}
	ql, qh := dst[0:128], dst[128:192]
	for h := range 2 {
		for l := range 32 {
			q1, q2, q3, q4 := q[128*h+l], q[128*h+32+l], q[128*h+64+l], q[128*h+96+l]
			ql[64*h+l] = q1&15 | (q3&15)<<4
			ql[64*h+32+l] = q2&15 | (q4&15)<<4
			qh[32*h+l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
	}
	for s := range 16 {
		dst[192+s] = byte(sc[s])
	}
	binary.LittleEndian.PutUint16(dst[208:], F32ToF16(d))
}
