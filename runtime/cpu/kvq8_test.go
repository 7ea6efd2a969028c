package cpu

import (
	"strings"
	"testing"

	"github.com/weft-inference/weft/runtime/llama"
)

// TestKVQ8Golden measures what a Q8_0 KV cache costs in accuracy: the F32
// synth models (head dims 32 and 64) run with a Q8_0 cache against
// llama.cpp's goldens of the same files, which it made with an F32 cache.
// Measured worst top-5 logit differences: 0.21 (synth-256), 0.26 (qwen2),
// 0.88 (llama3), 0.96 (smol, head dim 32), against 0.05 or less with an
// F16 cache; no argmax differs where the golden's top-1/top-2 gap exceeds
// 1 (1-6 differ below it per model). The AVX-512 VNNI kernel set, whose K
// scores also quantize the queries per 32 (as llama.cpp's q8_0 cache does),
// measured 0.25, 0.28, 1.53 and 0.96 (head dim 32 takes the float kernel).
// The random weights make these models far more sensitive than trained
// ones. The tolerance is 2 and no argmax may differ above the gap of 1, on
// every kernel set.
//
// The arch2 models (q/k norms, mixtures of experts, sinks) move further:
// first-step logits 0.67-1.41 (qwen3), 0.76-9.67 (qwen3moe), 1.08-2.09
// (gemma3), 0.61-4.78 (gpt-oss) from their F32 goldens, against
// 0.03-0.23 with an F16 cache, and later steps' argmaxes differ at gaps up
// to 13; they are not checked here (TestSlidingKVSameLogits runs them with
// a Q8_0 cache for the pool's bookkeeping).
func TestKVQ8Golden(t *testing.T) {
	forEachKernelSet(t, func(t *testing.T, _ string) {
		for _, name := range []string{"synth-256", "arch/synth-qwen2-256", "arch/synth-llama3-256", "arch/synth-smol-256"} {
			dir, file, ok := strings.Cut(name, "/")
			if !ok {
				dir, file = "", name
			} else {
				dir += "/"
			}
			t.Run(file, func(t *testing.T) {
				golden := "synth/" + dir + "golden/" + file + "-F32.json"
				checkSynthGoldenPool(t, Config{KVType: "q8_0", BlockSize: 16, NumBlocks: 16},
					"synth/"+dir+"models/"+file+"-F32.gguf", golden, golden, false, false, 2.0, 0)
			})
		}
	})
}

// TestKVQ8Config: a Q8_0 cache needs head dims of whole scale blocks, and
// its blocks take a byte per element and a float32 per 32.
func TestKVQ8Config(t *testing.T) {
	c := Config{KVType: "q8_0"}
	if err := c.validate(llama.HParams{ContextLen: 100, HeadDim: 8}); err == nil || !strings.Contains(err.Error(), "multiple of 32") {
		t.Errorf("q8_0 with head dim 8: %v, want an error naming the multiple of 32", err)
	}
	c = Config{KVType: "q8_0"}
	if err := c.validate(llama.HParams{ContextLen: 100, HeadDim: 64}); err != nil {
		t.Errorf("q8_0 with head dim 64: %v", err)
	}
	// 2 layers x (K, V) x 16 positions x 64 elements: 4,096 bytes and 128
	// scales of 4 bytes.
	p, err := PlanPool(PoolConfig{Layers: 2, KVDim: 64, ContextLen: 512, KVType: "q8_0", KVMemory: 4*4608 + 100})
	if err != nil || p.BytesPerBlock != 4608 || p.NumBlocks != 4 {
		t.Errorf("PlanPool q8_0 = %+v, %v; want 4 blocks of 4,608 bytes", p, err)
	}
	if _, err := PlanPool(PoolConfig{Layers: 2, KVDim: 48, ContextLen: 512, KVType: "q8_0"}); err == nil {
		t.Error("PlanPool q8_0 with 48 KV elements per position: no error")
	}
	m := loadModel(t, "synth/models/synth-256-F32.gguf")
	b, err := New(m, Config{KVType: "q8_0", BlockSize: 16, NumBlocks: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	hp := m.HP
	want := int64(2*hp.Layers*16*hp.KVHeads*hp.HeadDim) * 9 / 8
	if kv := b.KV(); kv.BytesPerBlock != want || kv.Type != "q8_0" {
		t.Errorf("KV() = %+v, want %d bytes per block of type q8_0", kv, want)
	}
}
