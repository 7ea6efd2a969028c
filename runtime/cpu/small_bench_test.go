package cpu

import (
	"context"
	"testing"

	"github.com/weft-inference/weft/runtime/batch"
)

// BenchmarkStories260KDecode measures single-sequence decode steps on the
// tiny trained model, where per-step overhead dominates (llama.cpp: ~11.8k
// tokens/s on one thread, docs/reference-numbers.md).
func BenchmarkStories260KDecode(b *testing.B) {
	m := loadModel(b, "models/stories260K.gguf")
	be, err := New(m, Config{KVType: "f32", BlockSize: 16, NumBlocks: 16})
	if err != nil {
		b.Fatal(err)
	}
	blocks := make([]int32, 16)
	for i := range blocks {
		blocks[i] = int32(i)
	}
	lg := [][]float32{make([]float32, m.HP.VocabSize)}
	b.ResetTimer()
	for k := range b.N {
		st := []batch.SeqStep{{Tokens: []int32{int32(3 + k%500)}, Pos: k % 256, Blocks: blocks}}
		if err := be.Forward(context.Background(), st, lg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
