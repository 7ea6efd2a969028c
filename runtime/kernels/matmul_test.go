package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

var allTypes = []gguf.Type{
	gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_1,
	gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
	gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4,
}

// scaleOffsets lists where each block type keeps its f16 scales, so random
// test blocks get finite, moderate scales.
var scaleOffsets = map[gguf.Type][]int{
	gguf.TypeQ8_0: {0}, gguf.TypeQ4_0: {0}, gguf.TypeQ4_1: {0, 2}, gguf.TypeQ5_0: {0}, gguf.TypeQ5_1: {0, 2},
	gguf.TypeQ2_K: {80, 82}, gguf.TypeQ3_K: {108}, gguf.TypeQ4_K: {0, 2}, gguf.TypeQ5_K: {0, 2}, gguf.TypeQ6_K: {208},
	gguf.TypeIQ4_NL: {0}, gguf.TypeIQ4_XS: {0},
}

// randomWeight builds a rows x cols weight of type typ with random content.
func randomWeight(rng *rand.Rand, typ gguf.Type, rows, cols int) quant.Weight {
	rb, err := typ.RowBytes(cols)
	if err != nil {
		panic(err)
	}
	data := make([]byte, rows*rb)
	switch typ {
	case gguf.TypeF32:
		for i := 0; i < len(data); i += 4 {
			binary.LittleEndian.PutUint32(data[i:], math.Float32bits(float32(rng.NormFloat64())))
		}
	case gguf.TypeF16:
		for i := 0; i < len(data); i += 2 {
			binary.LittleEndian.PutUint16(data[i:], quant.F32ToF16(float32(rng.NormFloat64())))
		}
	case gguf.TypeBF16:
		for i := 0; i < len(data); i += 2 {
			binary.LittleEndian.PutUint16(data[i:], uint16(math.Float32bits(float32(rng.NormFloat64()))>>16))
		}
	default:
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		bs := typ.BlockSize()
		for b := 0; b < len(data); b += bs {
			for _, off := range scaleOffsets[typ] {
				binary.LittleEndian.PutUint16(data[b+off:], quant.F32ToF16(float32(rng.Float64()*0.02+0.001)))
			}
			if typ == gguf.TypeMXFP4 { // E8M0 scale byte 118..123: values up to 12 * 2^(e-128), 0.012 .. 0.375
				data[b] = byte(118 + rng.IntN(6))
			}
		}
	}
	return quant.Weight{Type: typ, Rows: rows, Cols: cols, Data: data}
}

func randomVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// TestMatMulMatchesReference runs every kernel set this CPU has against the
// float64 reference for every type, several shapes and token counts.
func TestMatMulMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type shape struct{ rows, cols int }
	for _, typ := range allTypes {
		var shapes []shape
		switch typ.BlockLen() {
		case 1:
			shapes = []shape{{1, 1}, {3, 17}, {37, 172}, {64, 64}, {301, 768}}
		case 32:
			shapes = []shape{{1, 32}, {5, 64}, {37, 96}, {301, 768}}
		default:
			shapes = []shape{{1, 256}, {7, 256}, {33, 512}, {301, 768}}
		}
		for _, sh := range shapes {
			w := randomWeight(rng, typ, sh.rows, sh.cols)
			for _, n := range []int{1, 2, 3, 9, 17, 64, 200} {
				if limit := 4_000_000; raceEnabled && sh.rows*sh.cols*n > limit/8 || sh.rows*sh.cols*n > limit {
					continue
				}
				checkAllISAs(t, w, randomVec(rng, n*sh.cols), n)
			}
		}
	}
}

// TestInt8LegacyTypes holds the int8 kernels of the 32-column block types
// (Q4_0, Q4_1, Q5_0, Q5_1: a -8 or -16 offset or a per-block min, Q5's
// fifth bits in qh) to the reference at every token count 1..24 (row
// kernels, and from WEFT_LANE_MIN_N on AVX-512 VNNI the lane GEMM), at 40
// and 200 tokens (the lane GEMM's second panel pair), and at row lengths
// that are and are not multiples of 64 (the VNNI row kernel's step). It
// first checks the dispatch on a Gemma-3-270M-wide row: one token takes an
// int8 kernel on every x86 kernel set and 16 tokens take the lane GEMM on
// VNNI, so that a dispatch which sent these types back to the float path
// fails.
func TestInt8LegacyTypes(t *testing.T) {
	const prepLane = 1 // WEFT_PREP_LANE (kernels.h)
	rng := rand.New(rand.NewPCG(21, 22))
	types := []gguf.Type{gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1}
	for _, typ := range types {
		w := quant.Weight{Type: typ, Cols: 640}
		for _, isa := range availableISAs() {
			if isa >= isaAVX2 && !usesQuantizedActivations(isa, w, 1) {
				t.Errorf("%v, 640 columns, one token: the %v kernels do not take int8 products", typ, isa)
			}
			if kind, _ := prepKind(isa, w, 16); isa == isaVNNI && kind != prepLane {
				t.Errorf("%v, 640 columns, 16 tokens: the %v kernels prepare activations of kind %d, not the lane GEMM's", typ, isa, kind)
			}
		}
	}
	for _, typ := range types {
		for _, cols := range []int{32, 96, 128, 640} {
			w := randomWeight(rng, typ, 13, cols)
			for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 40, 200} {
				if raceEnabled && n > 5 && n != 8 && n != 17 && n != 40 {
					continue
				}
				checkAllISAs(t, w, randomVec(rng, n*cols), n)
			}
		}
	}
}

// TestQ5KLaneGEMM holds Q5_K (Q5_K_M's type) to the reference on every
// kernel set at the token counts around the lane GEMM's threshold and its
// second panel pair, after checking the dispatch: on AVX-512 VNNI the VNNI
// row kernel below WEFT_LANE_MIN_N_Q5_K tokens, the lane GEMM from it; on
// AVX2 and AVX-512 one token on int8 products (kern_i8.c), so that a
// dispatch which sent Q5_K back to the float path fails.
func TestQ5KLaneGEMM(t *testing.T) {
	const prepLane = 1 // WEFT_PREP_LANE (kernels.h)
	w := quant.Weight{Type: gguf.TypeQ5_K, Cols: 2048}
	from := 0
	for n := 1; n <= 64; n++ {
		kind, _ := prepKind(isaVNNI, w, n)
		if from == 0 && kind == prepLane {
			from = n
		}
		if from != 0 && kind != prepLane {
			t.Fatalf("Q5_K, %d tokens: avx512vnni prepares activations of kind %d after the lane GEMM's from %d", n, kind, from)
		}
	}
	t.Logf("avx512vnni takes the lane GEMM for Q5_K from %d tokens", from)
	for _, isa := range availableISAs() {
		if isa >= isaAVX2 && !usesQuantizedActivations(isa, w, 1) {
			t.Errorf("Q5_K, one token: the %v kernels do not take int8 products", isa)
		}
	}
	if bestISA() >= isaVNNI && (from < 2 || from > 24) {
		t.Fatalf("Q5_K: avx512vnni takes the lane GEMM from %d tokens, want 2..24", from)
	}
	rng := rand.New(rand.NewPCG(23, 24))
	for _, cols := range []int{256, 768} {
		w := randomWeight(rng, gguf.TypeQ5_K, 37, cols)
		for _, n := range []int{1, 4, 7, 8, 10, 11, 12, 16, 17, 23, 24, 40} {
			if raceEnabled && n != 1 && n != 11 && n != 17 {
				continue
			}
			checkAllISAs(t, w, randomVec(rng, n*cols), n)
		}
	}
}

// checkAllISAs runs MatMul on every kernel set this CPU has and holds each
// output to the float64 reference: 1e-5 of sum |w||x|, plus, where the
// kernel rounds x to 8 bits, the bound of that rounding.
func checkAllISAs(t *testing.T, w quant.Weight, x []float32, n int) {
	t.Helper()
	rows, cols := w.Rows, w.Cols
	want := make([]float32, n*rows)
	matMulRef(want, w, x, n)
	bound := make([]float64, n*rows) // sum |w||x| per output
	// qbound[blk]: sum |w| * (x block amax / 254), the 8-bit
	// rounding of x with one scale per blk columns (32, or 256
	// for the AVX2 K-quant kernels)
	qbound := map[int][]float64{32: make([]float64, n*rows), 256: make([]float64, n*rows)}
	row := make([]float32, cols)
	for r := range rows {
		w.Row(r, row)
		for tok := range n {
			xt := x[tok*cols : (tok+1)*cols]
			for k, v := range row {
				bound[tok*rows+r] += math.Abs(float64(v) * float64(xt[k]))
			}
			for blk, qb := range qbound {
				amax := 0.0
				for k, v := range row {
					if k%blk == 0 {
						amax = 0
						for _, xv := range xt[k:min(k+blk, len(xt))] {
							amax = max(amax, math.Abs(float64(xv)))
						}
					}
					qb[tok*rows+r] += math.Abs(float64(v)) * amax / 254
				}
			}
		}
	}
	for _, isa := range availableISAs() {
		name := fmt.Sprintf("%v/%dx%d/n=%d/%v", w.Type, rows, cols, n, isa)
		quantized := usesQuantizedActivations(isa, w, n)
		qb := qbound[activationBlock(isa, w, n)]
		got := matMulOn(t, name, isa, w, x, n)
		bad := 0
		for i := range want {
			tol := 1e-5*bound[i] + 1e-6
			if quantized {
				tol += 1.01 * qb[i]
			}
			if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= tol) {
				if bad < 3 {
					t.Errorf("%s: y[%d] = %g, want %g (tol %g)", name, i, got[i], want[i], tol)
				}
				bad++
			}
		}
	}
}

// matMulOn runs MatMul on kernel set isa into a fresh output with a guard
// element past n*Rows, failing the test (as name) on an error or a write
// past the output; it returns the n*Rows results.
func matMulOn(t *testing.T, name string, isa isaKind, w quant.Weight, x []float32, n int) []float32 {
	t.Helper()
	old := setISA(isa)
	got := make([]float32, n*w.Rows+1)
	got[len(got)-1] = 42 // guard
	err := MatMul(got, w, x, n)
	setISA(old)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if got[len(got)-1] != 42 {
		t.Errorf("%s: wrote past n*Rows", name)
	}
	return got[:n*w.Rows]
}

func TestMatMulConcurrentCallers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	w := randomWeight(rng, gguf.TypeQ8_0, 512, 768)
	x := randomVec(rng, 4*768)
	want := make([]float32, 4*512)
	MatMul(want, w, x, 4)
	done := make(chan []float32)
	for range 4 {
		go func() {
			y := make([]float32, 4*512)
			MatMul(y, w, x, 4)
			done <- y
		}()
	}
	for range 4 {
		y := <-done
		for i := range y {
			if y[i] != want[i] {
				t.Fatalf("concurrent MatMul differs at %d: %g vs %g", i, y[i], want[i])
			}
		}
	}
}

func TestMatMulPanicsOnBadShapes(t *testing.T) {
	w := quant.Weight{Type: gguf.TypeF32, Rows: 2, Cols: 4, Data: make([]byte, 32)}
	cases := []struct {
		name string
		f    func()
	}{
		{"short x", func() { MatMul(make([]float32, 2), w, make([]float32, 3), 1) }},
		{"short y", func() { MatMul(make([]float32, 1), w, make([]float32, 4), 1) }},
		{"short data", func() {
			MatMul(make([]float32, 2), quant.Weight{Type: gguf.TypeF32, Rows: 2, Cols: 4, Data: make([]byte, 31)}, make([]float32, 4), 1)
		}},
		{"bad type", func() {
			MatMul(make([]float32, 2), quant.Weight{Type: gguf.TypeQ8_K, Rows: 1, Cols: 256, Data: make([]byte, 292)}, make([]float32, 256), 1)
		}},
		{"cols not whole blocks", func() {
			MatMul(make([]float32, 2), quant.Weight{Type: gguf.TypeQ8_0, Rows: 1, Cols: 33, Data: make([]byte, 34)}, make([]float32, 33), 1)
		}},
	}
	for _, c := range cases {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", c.name)
				}
			}()
			c.f()
		}()
	}
}

// TestMatMulsMatchesMatMul checks that products computed together as one
// job equal the same products computed one by one.
func TestMatMulsMatchesMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	ws := []quant.Weight{
		randomWeight(rng, gguf.TypeQ8_0, 768, 768),
		randomWeight(rng, gguf.TypeQ4_K, 256, 768),
		randomWeight(rng, gguf.TypeF16, 100, 768),
		randomWeight(rng, gguf.TypeF32, 3, 768),
	}
	for _, n := range []int{1, 5, 30} {
		x := randomVec(rng, n*768)
		var ps []Product
		var want [][]float32
		for _, w := range ws {
			y := make([]float32, n*w.Rows)
			if err := MatMul(y, w, x, n); err != nil {
				t.Fatal(err)
			}
			want = append(want, y)
			ps = append(ps, Product{Y: make([]float32, n*w.Rows), W: w, X: x})
		}
		if err := MatMuls(n, ps...); err != nil {
			t.Fatal(err)
		}
		for i, p := range ps {
			amax := 0.0
			for _, v := range want[i] {
				amax = max(amax, math.Abs(float64(v)))
			}
			for k := range p.Y {
				if d := math.Abs(float64(p.Y[k] - want[i][k])); d > 1e-6*amax {
					t.Fatalf("n=%d product %d (%v): y[%d] = %g, want %g", n, i, p.W.Type, k, p.Y[k], want[i][k])
				}
			}
		}
	}
}

// TestMatMulsRaggedMatchesMatMul: every product of a ragged job, each with
// its own token count (none, a few, many), is bit for bit what MatMul
// writes for it alone, whether the job has fewer products than workers
// (chunked rows) or many more (one piece per product), and products that
// read the same x with the same count share its prepared activations
// without mixing up those with another count.
func TestMatMulsRaggedMatchesMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	types := []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ4_K, gguf.TypeF16, gguf.TypeF32, gguf.TypeQ4_0, gguf.TypeIQ4_XS, gguf.TypeMXFP4}
	for _, nprod := range []int{3, 40} {
		var ps []Product
		var want [][]float32
		x := randomVec(rng, 30*512)
		for i := range nprod {
			typ := types[i%len(types)]
			w := randomWeight(rng, typ, 64+32*(i%3), 512)
			n := []int{1, 2, 0, 3, 7, 30, 1}[i%7]
			// Pairs of products read the same x with the same count, as
			// an expert's gate and up do; the next pair reads x at another
			// count.
			xs := x[:n*512]
			y := make([]float32, n*w.Rows)
			if err := MatMul(y, w, xs, n); err != nil {
				t.Fatal(err)
			}
			want = append(want, y)
			ps = append(ps, Product{Y: make([]float32, n*w.Rows), W: w, X: xs, N: n})
		}
		if err := MatMulsRagged(ps...); err != nil {
			t.Fatal(err)
		}
		for i, p := range ps {
			for k := range p.Y {
				if math.Float32bits(p.Y[k]) != math.Float32bits(want[i][k]) {
					t.Fatalf("%d products: product %d (%v, %d tokens): y[%d] = %g, MatMul alone %g", nprod, i, p.W.Type, p.N, k, p.Y[k], want[i][k])
				}
			}
		}
	}
}
