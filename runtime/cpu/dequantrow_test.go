package cpu

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"testing"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// TestDequantRowIQ4Embeddings: the embedding lookup of an IQ4_NL or IQ4_XS
// token_embd (the 4-bit quants of Qwen3 downloads keep it in the model's
// type), row by row, gives ggml's dequantization of the whole tensor bit
// for bit. The sha256s are those of runtime/quant's arch2DequantSHA256
// (ggml de3ff81's to_float; how they were made is said there).
func TestDequantRowIQ4Embeddings(t *testing.T) {
	tests := []struct {
		file string
		typ  gguf.Type
		want string
	}{
		{"synth-qwen3-256-IQ4_NL.gguf", gguf.TypeIQ4_NL, "2a88b321661fd7077d0080bbab3eff1c10179f7d77a972c9c3e5251c6bb893ee"},
		{"synth-qwen3-256-IQ4_XS.gguf", gguf.TypeIQ4_XS, "739580736a79a757473eab0b30645e4cf27c1b1fe23023896177c1f0943362df"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			f, err := gguf.Open(shareddata.Path(t, "synth/arch2/models/"+tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ti, ok := f.Tensor("token_embd.weight")
			if !ok {
				t.Fatal("token_embd.weight missing")
			}
			w, err := quant.FromTensor(ti)
			if err != nil {
				t.Fatal(err)
			}
			if w.Type != tc.typ {
				t.Fatalf("token_embd is %v, want %v", w.Type, tc.typ)
			}
			row := make([]float32, w.Cols)
			h := sha256.New()
			buf := make([]byte, 4*w.Cols)
			for r := range w.Rows {
				dequantRow(w, r, row)
				for i, v := range row {
					binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
				}
				h.Write(buf)
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != tc.want {
				t.Errorf("sha256 of the rows %s, ggml's %s", got, tc.want)
			}
		})
	}
}
