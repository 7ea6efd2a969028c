package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
)

func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const rows, cols = 8, 512
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	src[5] = 0 // some exact zeros and a constant block
	for i := 64; i < 96; i++ {
		src[i] = 0.25
	}
	tests := []struct {
		typ gguf.Type
		tol float64 // max abs error relative to the data's max magnitude
	}{
		{gguf.TypeF32, 0},
		{gguf.TypeF16, 1e-3},
		{gguf.TypeQ8_0, 0.01},
		{gguf.TypeQ4_0, 0.1},
		{gguf.TypeQ5_0, 0.05},
		{gguf.TypeQ5_1, 0.05},
		{gguf.TypeQ4_K, 0.1},
		{gguf.TypeQ5_K, 0.05},
		{gguf.TypeQ6_K, 0.03},
		{gguf.TypeIQ4_NL, 0.1},
		{gguf.TypeIQ4_XS, 0.1},
		{gguf.TypeMXFP4, 0.25},
	}
	var amax float64
	for _, v := range src {
		amax = max(amax, math.Abs(float64(v)))
	}
	for _, tc := range tests {
		t.Run(tc.typ.String(), func(t *testing.T) {
			data, err := Quantize(tc.typ, src, cols)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, len(src))
			if err := Dequantize(tc.typ, data, got); err != nil {
				t.Fatal(err)
			}
			var worst, sq float64
			for i := range src {
				d := math.Abs(float64(got[i] - src[i]))
				worst = max(worst, d)
				sq += d * d
			}
			if worst > tc.tol*amax {
				t.Errorf("max abs error %.3g > %.3g", worst, tc.tol*amax)
			}
			t.Logf("max abs error %.3g, rms %.3g", worst, math.Sqrt(sq/float64(len(src))))
		})
	}
}

// TestQuantizeIQ4Representable: values a block can hold exactly come back
// exactly. Random IQ4_NL and MXFP4 blocks whose largest magnitude is at
// the table's end (IQ4_NL: one index 0, -127 d; MXFP4: one +-12 or +-8,
// which fixes the shared exponent) are dequantized, quantized again and
// dequantized: the same floats.
func TestQuantizeIQ4Representable(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, typ := range []gguf.Type{gguf.TypeIQ4_NL, gguf.TypeMXFP4} {
		t.Run(typ.String(), func(t *testing.T) {
			const blocks = 200
			bs := typ.BlockSize()
			data := make([]byte, blocks*bs)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			for b := range blocks {
				blk := data[b*bs : (b+1)*bs]
				if typ == gguf.TypeIQ4_NL {
					binary.LittleEndian.PutUint16(blk, F32ToF16(float32((rng.Float64()-0.5)*0.1)))
					blk[2+rng.IntN(16)] &= 0xf0 // one index 0: -127 d, the largest magnitude
				} else {
					blk[0] = byte(100 + rng.IntN(50))
					blk[1+rng.IntN(16)] = byte([]int{7, 6, 15, 14}[rng.IntN(4)]) // 12, 8, -12 or -8
				}
			}
			want := make([]float32, blocks*32)
			if err := Dequantize(typ, data, want); err != nil {
				t.Fatal(err)
			}
			again, err := Quantize(typ, want, 32)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, len(want))
			if err := Dequantize(typ, again, got); err != nil {
				t.Fatal(err)
			}
			if i := firstBitDiff(got, want); i >= 0 {
				t.Errorf("value %d: %g after a round trip, was %g", i, got[i], want[i])
			}
		})
	}
}

// TestQuantizeIQ4Nearest: with the scale the encoder stored, every value
// took the table entry nearest to it (round to nearest).
func TestQuantizeIQ4Nearest(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	src := make([]float32, 64*32)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * math.Exp(rng.Float64()*4-2))
	}
	for _, typ := range []gguf.Type{gguf.TypeIQ4_NL, gguf.TypeMXFP4} {
		data, err := Quantize(typ, src, 32)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(src))
		if err := Dequantize(typ, data, got); err != nil {
			t.Fatal(err)
		}
		bs := typ.BlockSize()
		for b := range len(src) / 32 {
			var cands []float32 // what this block's scale can give
			if typ == gguf.TypeIQ4_NL {
				d := F16ToF32(binary.LittleEndian.Uint16(data[b*bs:]))
				for _, v := range iq4Values {
					cands = append(cands, d*float32(v))
				}
			} else {
				for _, v := range mxfp4Values {
					cands = append(cands, float32(v)*e8m0Half(data[b*bs]))
				}
			}
			for i := b * 32; i < b*32+32; i++ {
				err := math.Abs(float64(got[i] - src[i]))
				for _, c := range cands {
					if e := math.Abs(float64(c - src[i])); e < err {
						t.Errorf("%v value %d = %g: stored %g, %g is nearer", typ, i, src[i], got[i], c)
						break
					}
				}
			}
		}
	}
}

// firstBitDiff is the first index where a and b differ in bits, or -1.
func firstBitDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestQuantizeIQ4XSNearest: IQ4_XS with sub-blocks of very different
// magnitudes: with the scales the encoder stored (d and each sub-block's
// 6-bit ls), every value took the entry nearest to it, and the sub-block
// scale is within one step of the one that maps its largest magnitude to
// the table's end.
func TestQuantizeIQ4XSNearest(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	src := make([]float32, 16*256)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * math.Exp(float64((i/32)%8)-4))
	}
	data, err := Quantize(gguf.TypeIQ4_XS, src, 256)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(src))
	if err := Dequantize(gguf.TypeIQ4_XS, data, got); err != nil {
		t.Fatal(err)
	}
	for b := range len(src) / 256 {
		blk := data[b*136 : (b+1)*136]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		sh := binary.LittleEndian.Uint16(blk[2:])
		for ib := range 8 {
			dl := d * float32(iq4xsScale(sh, blk[4:8], ib)-32)
			var amax float64
			for i := b*256 + 32*ib; i < b*256+32*ib+32; i++ {
				amax = max(amax, math.Abs(float64(src[i])))
				err := math.Abs(float64(got[i] - src[i]))
				for _, v := range iq4Values {
					if c := math.Abs(float64(dl*float32(v) - src[i])); c < err-1e-6*amax-1e-30 {
						t.Fatalf("block %d sub-block %d value %d: %g became %g, but %g is nearer", b, ib, i, src[i], got[i], dl*float32(v))
					}
				}
			}
			if want := amax / 127; math.Abs(math.Abs(float64(dl))-want) > float64(d)/2+1e-6*want {
				t.Errorf("block %d sub-block %d: scale %g, want %g within half of d %g", b, ib, dl, want, d)
			}
		}
	}
}
