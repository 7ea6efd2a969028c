package kernels

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// TestDequantMatchesCPU compiles dequant.cuh's dq_elem for the host with g++
// (testdata/dq_host.cc) and checks that it decodes random blocks of every
// type the GPU supports bit-identically to runtime/quant, which matches
// ggml. The device compiles the same source, so this pins the block
// layouts; it does not exercise the GPU's float arithmetic.
func TestDequantMatchesCPU(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "dq_host")
	if out, err := exec.Command("g++", "-O1", "-o", bin, "testdata/dq_host.cc").CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	rng := rand.New(rand.NewPCG(3, 5))
	// scaleAt lists the byte offsets of F16 scale fields per block, which
	// get finite values (random bits elsewhere).
	tests := []struct {
		typ     gguf.Type
		scaleAt []int
	}{
		{gguf.TypeQ8_0, []int{0}},
		{gguf.TypeQ4_0, []int{0}},
		{gguf.TypeQ4_K, []int{0, 2}},
		{gguf.TypeQ6_K, []int{208}},
		{gguf.TypeF16, nil},
		{gguf.TypeBF16, nil},
		{gguf.TypeF32, nil},
	}
	const cols = 1024
	for _, tc := range tests {
		t.Run(tc.typ.String(), func(t *testing.T) {
			n, err := tc.typ.RowBytes(cols)
			if err != nil {
				t.Fatal(err)
			}
			src := make([]byte, n)
			switch tc.typ {
			case gguf.TypeF16:
				for i := 0; i < cols; i++ {
					binary.LittleEndian.PutUint16(src[2*i:], quant.F32ToF16(float32(rng.NormFloat64())))
				}
			case gguf.TypeBF16:
				for i := 0; i < cols; i++ {
					binary.LittleEndian.PutUint16(src[2*i:], uint16(math.Float32bits(float32(rng.NormFloat64()))>>16))
				}
			case gguf.TypeF32:
				for i := 0; i < cols; i++ {
					binary.LittleEndian.PutUint32(src[4*i:], math.Float32bits(float32(rng.NormFloat64())))
				}
			default:
				for i := range src {
					src[i] = byte(rng.Uint32())
				}
				bs := tc.typ.BlockSize()
				for b := 0; b < n; b += bs {
					for _, off := range tc.scaleAt {
						binary.LittleEndian.PutUint16(src[b+off:], quant.F32ToF16(float32(rng.Float64()*0.1)))
					}
				}
			}
			want := make([]float32, cols)
			if err := quant.Dequantize(tc.typ, src, want); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, strconv.Itoa(int(tc.typ)), strconv.Itoa(cols))
			cmd.Stdin = bytes.NewReader(src)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("dq_host: %v", err)
			}
			if len(out) != 4*cols {
				t.Fatalf("dq_host wrote %d bytes, want %d", len(out), 4*cols)
			}
			for i := range cols {
				got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:]))
				if math.Float32bits(got) != math.Float32bits(want[i]) {
					t.Fatalf("element %d: dq_elem %v (%#x), runtime/quant %v (%#x)", i, got, math.Float32bits(got), want[i], math.Float32bits(want[i]))
				}
			}
		})
	}
}
