package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// TestBatchInvariantMatMul: with SetBatchInvariant, every kernel set gives
// each token the same bits alone as among n tokens, for every type the
// kernels have a fast path for and token counts on each side of every
// threshold (the lane GEMM's 16, the row kernels' 24, the GEMM's 48/96/160).
// Without it the products differ (checked for one shape, so the test knows
// it compares kernels that can disagree).
func TestBatchInvariantMatMul(t *testing.T) {
	defer SetBatchInvariant(SetBatchInvariant(true))
	types := []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0,
		gguf.TypeQ5_1, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K, gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4}
	shapes := []struct{ rows, cols int }{{64, 256}, {96, 768}, {40, 1536}}
	for _, isa := range availableISAs() {
		t.Run(isa.String(), func(t *testing.T) {
			defer setISA(setISA(isa))
			for _, typ := range types {
				for _, sh := range shapes {
					rng := rand.New(rand.NewPCG(uint64(typ), uint64(sh.cols)))
					w := randomWeight(rng, typ, sh.rows, sh.cols)
					const nMax = 200
					x := randomVec(rng, nMax*sh.cols)
					alone := make([]float32, nMax*sh.rows)
					for tok := range nMax {
						if err := MatMul(alone[tok*sh.rows:(tok+1)*sh.rows], w, x[tok*sh.cols:(tok+1)*sh.cols], 1); err != nil {
							t.Fatal(err)
						}
					}
					for _, n := range []int{2, 5, 15, 16, 17, 24, 48, 96, 160, 200} {
						y := make([]float32, n*sh.rows)
						if err := MatMul(y, w, x[:n*sh.cols], n); err != nil {
							t.Fatal(err)
						}
						if i := firstBitDiff(y, alone[:n*sh.rows]); i >= 0 {
							t.Fatalf("%v %dx%d, %d tokens: token %d row %d = %v, alone %v",
								typ, sh.rows, sh.cols, n, i/sh.rows, i%sh.rows, y[i], alone[i])
						}
					}
				}
			}
		})
	}
}

func firstBitDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestBatchVariantKernelsDiffer shows what the invariant setting is for:
// on the best kernel set, a Q8_0 (VNNI lane GEMM) or F16 (packed GEMM)
// product of many tokens gives some token other bits than its product alone.
func TestBatchVariantKernelsDiffer(t *testing.T) {
	if bestISA() < isaAVX2 {
		t.Logf("kernel set %v: one kernel for every token count", bestISA())
		return
	}
	defer SetBatchInvariant(SetBatchInvariant(false))
	defer setISA(setISA(bestISA()))
	for _, typ := range []gguf.Type{gguf.TypeF16, gguf.TypeQ8_0} {
		rng := rand.New(rand.NewPCG(7, uint64(typ)))
		w := randomWeight(rng, typ, 64, 768)
		const n = 200
		x := randomVec(rng, n*768)
		y := make([]float32, n*64)
		if err := MatMul(y, w, x, n); err != nil {
			t.Fatal(err)
		}
		differ := false
		for tok := 0; tok < n && !differ; tok++ {
			one := make([]float32, 64)
			if err := MatMul(one, w, x[tok*768:(tok+1)*768], 1); err != nil {
				t.Fatal(err)
			}
			differ = firstBitDiff(one, y[tok*64:(tok+1)*64]) >= 0
		}
		if !differ {
			t.Errorf("%v: %d tokens in one product gave every token its bits alone; %s", typ, n, fmt.Sprint("the invariance test would prove nothing"))
		}
	}
}

// TestKQuantWideKernelSameBits: below the lane GEMM (1-23 tokens, 1-10
// on Zen 4), Q4_K and Q6_K take kern_i8.c's integer kernel on the avx512
// set and its 512-bit form (weft_k512_matmul) on avx512vnni; the two must
// give the same bits, so that a CPU's choice of kernel set never changes a
// result of these types at these token counts. It first checks the
// dispatch: below the threshold (24, or 11 on Zen 4) every token count
// takes the row kernels' per-256 activations on avx512vnni, from it the
// lane GEMM's.
func TestKQuantWideKernelSameBits(t *testing.T) {
	if bestISA() < isaVNNI {
		t.Skipf("kernel set %v: no avx512vnni here, so no 512-bit K-quant kernel to compare", bestISA())
	}
	const prepLane, prepI8K = 1, 4 // WEFT_PREP_LANE, WEFT_PREP_I8K (kernels.h)
	from := 0
	for _, typ := range []gguf.Type{gguf.TypeQ4_K, gguf.TypeQ6_K} {
		w := quant.Weight{Type: typ, Cols: 2048}
		f := 1
		for ; f <= 64; f++ {
			if k, _ := prepKind(isaVNNI, w, f); k != prepI8K {
				break
			}
		}
		if f != 11 && f != 24 || from != 0 && f != from {
			t.Fatalf("%v: avx512vnni takes the row kernels below %d tokens; want 24, or 11 on Zen 4, the same for Q4_K and Q6_K", typ, f)
		}
		from = f
		for n := from; n <= 64; n++ {
			if k, _ := prepKind(isaVNNI, w, n); k != prepLane {
				t.Errorf("%v, %d tokens: avx512vnni prepares activations of kind %d, not the lane GEMM's %d", typ, n, k, prepLane)
			}
		}
	}
	t.Logf("the lane GEMM takes Q4_K and Q6_K from %d tokens", from)
	defer setISA(setISA(bestISA()))
	for _, typ := range []gguf.Type{gguf.TypeQ4_K, gguf.TypeQ6_K} {
		for _, sh := range []struct{ rows, cols int }{{37, 256}, {96, 768}, {40, 2048}} {
			rng := rand.New(rand.NewPCG(11, uint64(typ)*7+uint64(sh.cols)))
			w := randomWeight(rng, typ, sh.rows, sh.cols)
			for n := 1; n < from; n++ {
				x := randomVec(rng, n*sh.cols)
				got, want := make([]float32, n*sh.rows), make([]float32, n*sh.rows)
				setISA(isaVNNI)
				if err := MatMul(got, w, x, n); err != nil {
					t.Fatal(err)
				}
				setISA(isaAVX512)
				if err := MatMul(want, w, x, n); err != nil {
					t.Fatal(err)
				}
				if i := firstBitDiff(got, want); i >= 0 {
					t.Fatalf("%v %dx%d, %d tokens: token %d row %d = %v on avx512vnni, %v on avx512",
						typ, sh.rows, sh.cols, n, i/sh.rows, i%sh.rows, got[i], want[i])
				}
			}
		}
	}
}
