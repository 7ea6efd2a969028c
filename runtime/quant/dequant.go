package quant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/weft-inference/weft/runtime/gguf"
)

// ErrSize reports a source or destination length that does not match the
// tensor type's block layout.
var ErrSize = errors.New("quant: size mismatch")

// ErrType reports a tensor type this package cannot dequantize.
var ErrType = errors.New("quant: unsupported tensor type")

// Supported reports whether Dequantize and MatMul handle type t.
func Supported(t gguf.Type) bool {
	switch t {
	case gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0,
		gguf.TypeQ5_1, gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
		gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4:
		return true
	}
	return false
}

type dequantFunc func(src []byte, dst []float32)

var dequantizers = map[gguf.Type]dequantFunc{
	gguf.TypeF32:  dequantF32,
	gguf.TypeF16:  dequantF16,
	gguf.TypeBF16: dequantBF16,
	gguf.TypeQ8_0: dequantQ8_0,
	gguf.TypeQ4_0: dequantQ4_0,
	gguf.TypeQ4_1: dequantQ4_1,
	gguf.TypeQ5_0: dequantQ5_0,
	gguf.TypeQ5_1: dequantQ5_1,
	gguf.TypeQ2_K: dequantQ2_K,
	gguf.TypeQ3_K: dequantQ3_K,
	gguf.TypeQ4_K: dequantQ4_K,
	gguf.TypeQ5_K: dequantQ5_K,
	gguf.TypeQ6_K: dequantQ6_K,
	// dequant_iq4.go
	gguf.TypeIQ4_NL: dequantIQ4_NL,
	gguf.TypeIQ4_XS: dequantIQ4_XS,
	gguf.TypeMXFP4:  dequantMXFP4,
}

// Dequantize decodes len(dst) elements of type t from src, bit-exactly as
// ggml does. len(dst) must be a whole number of blocks and len(src) exactly
// the bytes those blocks take.
func Dequantize(t gguf.Type, src []byte, dst []float32) error {
	f, ok := dequantizers[t]
	if !ok {
		return fmt.Errorf("%w: %v", ErrType, t)
	}
	need, err := t.RowBytes(len(dst))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSize, err)
	}
	if len(src) != need {
		return fmt.Errorf("%w: %d %v elements take %d bytes, got %d", ErrSize, len(dst), t, need, len(src))
	}
	f(src, dst)
	return nil
}

// Every product below is rounded to float32 before it is added (explicit
// float32 conversions), so no platform fuses it into an FMA: that keeps the
// results bit-identical to ggml's scalar reference code.

func f16(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

func dequantF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func dequantF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func dequantBF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
	}
}

func dequantQ8_0(src []byte, dst []float32) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*34 : b*34+34]
		d := f16(blk)
		y := dst[b*32 : b*32+32]
		for j := range 32 {
			y[j] = float32(int8(blk[2+j])) * d
		}
	}
}

func dequantQ4_0(src []byte, dst []float32) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*18 : b*18+18]
		d := f16(blk)
		qs := blk[2:]
		y := dst[b*32 : b*32+32]
		for j := range 16 {
			y[j] = float32(int32(qs[j]&0xf)-8) * d
			y[j+16] = float32(int32(qs[j]>>4)-8) * d
		}
	}
}

func dequantQ4_1(src []byte, dst []float32) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*20 : b*20+20]
		d, m := f16(blk), f16(blk[2:])
		qs := blk[4:]
		y := dst[b*32 : b*32+32]
		for j := range 16 {
			y[j] = float32(float32(qs[j]&0xf)*d) + m
			y[j+16] = float32(float32(qs[j]>>4)*d) + m
		}
	}
}

func dequantQ5_0(src []byte, dst []float32) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*22 : b*22+22]
		d := f16(blk)
		qh := binary.LittleEndian.Uint32(blk[2:])
		qs := blk[6:]
		y := dst[b*32 : b*32+32]
		for j := range 16 {
			h0 := byte(qh>>j<<4) & 0x10
			h1 := byte(qh>>(j+12)) & 0x10
			y[j] = float32(int32(qs[j]&0xf|h0)-16) * d
			y[j+16] = float32(int32(qs[j]>>4|h1)-16) * d
		}
	}
}

func dequantQ5_1(src []byte, dst []float32) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*24 : b*24+24]
		d, m := f16(blk), f16(blk[2:])
		qh := binary.LittleEndian.Uint32(blk[4:])
		qs := blk[8:]
		y := dst[b*32 : b*32+32]
		for j := range 16 {
			h0 := byte(qh>>j<<4) & 0x10
			h1 := byte(qh>>(j+12)) & 0x10
			y[j] = float32(float32(qs[j]&0xf|h0)*d) + m
			y[j+16] = float32(float32(qs[j]>>4|h1)*d) + m
		}
	}
}

// Q2_K block: scales[16] qs[64] d dmin (84 bytes).
func dequantQ2_K(src []byte, dst []float32) {
	for b := 0; b < len(dst)/256; b++ {
		blk := src[b*84 : b*84+84]
		scales, q := blk[:16], blk[16:80]
		d, dmin := f16(blk[80:]), f16(blk[82:])
		y := dst[b*256 : b*256+256]
		is, yi := 0, 0
		for n := 0; n < 2; n++ {
			qq := q[n*32:]
			for shift := uint(0); shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					sc := scales[is]
					is++
					dl := d * float32(sc&0xf)
					ml := dmin * float32(sc>>4)
					for l := range 16 {
						y[yi] = float32(dl*float32((qq[half*16+l]>>shift)&3)) - ml
						yi++
					}
				}
			}
		}
	}
}

// Q3_K block: hmask[32] qs[64] scales[12] d (110 bytes).
func dequantQ3_K(src []byte, dst []float32) {
	var sc [16]int8
	for b := 0; b < len(dst)/256; b++ {
		blk := src[b*110 : b*110+110]
		hm, q, s := blk[:32], blk[32:96], blk[96:108]
		d := f16(blk[108:])
		q3kScales(s, &sc)
		y := dst[b*256 : b*256+256]
		is, yi := 0, 0
		m := byte(1)
		for n := 0; n < 2; n++ {
			qq := q[n*32:]
			for shift := uint(0); shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					dl := d * float32(int32(sc[is])-32)
					is++
					for l := range 16 {
						v := int32((qq[half*16+l] >> shift) & 3)
						if hm[half*16+l]&m == 0 {
							v -= 4
						}
						y[yi] = dl * float32(v)
						yi++
					}
				}
				m <<= 1
			}
		}
	}
}

// q3kScales unpacks the 16 6-bit scales of a Q3_K block (unsigned, 0..63).
func q3kScales(s []byte, out *[16]int8) {
	for j := range 16 {
		lo := s[j%8] >> (4 * uint(j/8)) & 0xf
		hi := s[8+j%4] >> (2 * uint(j/4)) & 3
		out[j] = int8(lo | hi<<4)
	}
}

// k4ScaleMin returns scale and min j (0..7) of a Q4_K/Q5_K 12-byte scale block.
func k4ScaleMin(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// Q4_K block: d dmin scales[12] qs[128] (144 bytes).
func dequantQ4_K(src []byte, dst []float32) {
	for b := 0; b < len(dst)/256; b++ {
		blk := src[b*144 : b*144+144]
		d, dmin := f16(blk), f16(blk[2:])
		scales, q := blk[4:16], blk[16:144]
		y := dst[b*256 : b*256+256]
		for j := 0; j < 4; j++ {
			sc1, m1b := k4ScaleMin(2*j, scales)
			sc2, m2b := k4ScaleMin(2*j+1, scales)
			d1, m1 := d*float32(sc1), dmin*float32(m1b)
			d2, m2 := d*float32(sc2), dmin*float32(m2b)
			qq := q[32*j : 32*j+32]
			yy := y[64*j : 64*j+64]
			for l := range 32 {
				yy[l] = float32(d1*float32(qq[l]&0xf)) - m1
				yy[l+32] = float32(d2*float32(qq[l]>>4)) - m2
			}
		}
	}
}

// Q5_K block: d dmin scales[12] qh[32] qs[128] (176 bytes).
func dequantQ5_K(src []byte, dst []float32) {
	for b := 0; b < len(dst)/256; b++ {
		blk := src[b*176 : b*176+176]
		d, dmin := f16(blk), f16(blk[2:])
		scales, qh, q := blk[4:16], blk[16:48], blk[48:176]
		y := dst[b*256 : b*256+256]
		for j := 0; j < 4; j++ {
			sc1, m1b := k4ScaleMin(2*j, scales)
			sc2, m2b := k4ScaleMin(2*j+1, scales)
			d1, m1 := d*float32(sc1), dmin*float32(m1b)
			d2, m2 := d*float32(sc2), dmin*float32(m2b)
			u1, u2 := byte(1)<<(2*j), byte(2)<<(2*j)
			qq := q[32*j : 32*j+32]
			yy := y[64*j : 64*j+64]
			for l := range 32 {
				v1, v2 := qq[l]&0xf, qq[l]>>4
				if qh[l]&u1 != 0 {
					v1 += 16
				}
				if qh[l]&u2 != 0 {
					v2 += 16
				}
				yy[l] = float32(d1*float32(v1)) - m1
				yy[l+32] = float32(d2*float32(v2)) - m2
			}
		}
	}
}

// Q6_K block: ql[128] qh[64] scales[16] (int8) d (210 bytes).
func dequantQ6_K(src []byte, dst []float32) {
	for b := 0; b < len(dst)/256; b++ {
		blk := src[b*210 : b*210+210]
		d := f16(blk[208:])
		y := dst[b*256 : b*256+256]
		for n := 0; n < 2; n++ {
			ql, qh := blk[64*n:64*n+64], blk[128+32*n:128+32*n+32]
			sc := blk[192+8*n : 192+8*n+8]
			yy := y[128*n : 128*n+128]
			for l := range 32 {
				is := l / 16
				q1 := int32(ql[l]&0xf|(qh[l]&3)<<4) - 32
				q2 := int32(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				q3 := int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				yy[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
				yy[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
				yy[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
				yy[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
			}
		}
	}
}
