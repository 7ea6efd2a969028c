package quant

import (
	"encoding/binary"
	"math"
)

// The 4-bit non-linear types: each 4-bit quant is an index into a fixed
// table of 16 int8 values, times a block scale.
//
//	IQ4_NL (18 bytes, 32 values): f16 d, then 16 bytes of indices, value
//	  j in the low nibble of byte j, value j+16 in its high nibble;
//	  y = d * iq4Values[q].
//	IQ4_XS (136 bytes, 256 values): f16 d, uint16 scalesH, 4 bytes
//	  scalesL, 128 bytes of indices laid out as IQ4_NL's per 32 values.
//	  Sub-block i (32 values) has the 6-bit scale ls = low nibble i of
//	  scalesL (byte i/2, nibble i%2) | bits 2i, 2i+1 of scalesH << 4;
//	  dl = d * (ls - 32), y = dl * iq4Values[q].
//	MXFP4 (17 bytes, 32 values): an E8M0 scale byte e, then the indices
//	  as IQ4_NL's, into mxfp4Values (the E2M1 values, doubled so they are
//	  integers); y = mxfp4Values[q] * 2^(e-128) (the halved scale undoes
//	  the doubling).

// iq4Values is the IQ4_NL / IQ4_XS value table (ggml's kvalues_iq4nl).
var iq4Values = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// mxfp4Values are the 16 E2M1 (sign, 2 exponent bits, 1 mantissa bit)
// values doubled: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, times 2.
var mxfp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0Half is 2^(e-128): half of the E8M0 scale 2^(e-127). Exponents 0
// and 1 give the subnormals 2^-128 and 2^-127; 255 gives 2^127 (no NaN).
func e8m0Half(e byte) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func dequantIQ4_NL(src []byte, dst []float32) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*18 : b*18+18]
		d := f16(blk)
		qs := blk[2:]
		y := dst[b*32 : b*32+32]
		for j := range 16 {
			y[j] = d * float32(iq4Values[qs[j]&0xf])
			y[j+16] = d * float32(iq4Values[qs[j]>>4])
		}
	}
}

// iq4xsScale returns the 6-bit scale (0..63, before the -32) of sub-block
// ib (0..7) of an IQ4_XS super-block.
func iq4xsScale(scalesH uint16, scalesL []byte, ib int) int32 {
	lo := scalesL[ib/2] >> (4 * uint(ib%2)) & 0xf
	hi := byte(scalesH>>(2*uint(ib))) & 3
	return int32(lo | hi<<4)
}

func dequantIQ4_XS(src []byte, dst []float32) {
	for b := 0; b < len(dst)/256; b++ {
		blk := src[b*136 : b*136+136]
		d := f16(blk)
		sh := binary.LittleEndian.Uint16(blk[2:])
		sl, qs := blk[4:8], blk[8:136]
		y := dst[b*256 : b*256+256]
		for ib := range 8 {
			dl := d * float32(iq4xsScale(sh, sl, ib)-32)
			q := qs[16*ib : 16*ib+16]
			yy := y[32*ib : 32*ib+32]
			for j := range 16 {
				yy[j] = dl * float32(iq4Values[q[j]&0xf])
				yy[j+16] = dl * float32(iq4Values[q[j]>>4])
			}
		}
	}
}

func dequantMXFP4(src []byte, dst []float32) {
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*17 : b*17+17]
		d := e8m0Half(blk[0])
		qs := blk[1:]
		y := dst[b*32 : b*32+32]
		for j := range 16 {
			y[j] = float32(mxfp4Values[qs[j]&0xf]) * d
			y[j+16] = float32(mxfp4Values[qs[j]>>4]) * d
		}
	}
}
