package cpu

import (
	"bytes"
	"context"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/llama"
)

// TestGeneratedPresetsRun generates each real-model preset of llama.Preset
// at a tiny scale (vocabulary 512, the width, FFN and head size divided,
// at most 6 layers, F32; the head counts, architecture and the gemma3
// window pattern kept, its window cut to 4), loads it and runs a 12-token
// prompt and one decode step: the loader must see the preset's
// architecture, head size and per-layer windows, and the logits must be
// finite. (The full-size files are 1-3 GB; weft gen-model writes them.)
func TestGeneratedPresetsRun(t *testing.T) {
	tests := []struct {
		preset  string
		windows []int
	}{
		{"llama-3.2-1b", []int{0, 0}},
		{"qwen3-0.6b", []int{0, 0}},
		{"qwen3-1.7b", []int{0, 0}},
		{"gemma3-270m", []int{4, 4, 4, 4, 4, 0}},
		{"gemma3-1b", []int{4, 4, 4, 4, 4, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.preset, func(t *testing.T) {
			c, err := llama.Preset(tc.preset)
			if err != nil {
				t.Fatal(err)
			}
			full := c
			c.VocabSize, c.Type = 512, gguf.TypeF32
			c.Dim, c.FFN = c.Dim/16, c.FFN/16
			if c.HeadDim != 0 {
				c.HeadDim /= 4
			}
			c.Layers = len(tc.windows)
			if c.Window != 0 {
				c.Window = 4
			}
			var buf bytes.Buffer
			if err := llama.Generate(c, &buf); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Parse(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			m, err := llama.FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			wantHD := c.HeadDim
			if wantHD == 0 {
				wantHD = c.Dim / c.Heads
			}
			if m.HP.Arch != full.Arch || m.HP.HeadDim != wantHD || m.HP.Heads != full.Heads || m.HP.KVHeads != full.KVHeads {
				t.Errorf("loaded %s with %d/%d heads of %d; want %s, %d/%d of %d", m.HP.Arch, m.HP.Heads, m.HP.KVHeads, m.HP.HeadDim,
					full.Arch, full.Heads, full.KVHeads, wantHD)
			}
			var windows []int
			for _, l := range m.Layers {
				windows = append(windows, l.Window)
			}
			if diff := cmp.Diff(tc.windows, windows); diff != "" {
				t.Errorf("windows (-want +got):\n%s", diff)
			}
			b, err := New(m, Config{KVType: "f16", BlockSize: 16, NumBlocks: 4})
			if err != nil {
				t.Fatal(err)
			}
			prompt := invTokens(5, 12)
			lg := make([]float32, m.HP.VocabSize)
			steps := []batch.SeqStep{{Seq: 1, Tokens: prompt, Blocks: []int32{0}}, {Seq: 1, Tokens: prompt[:1], Pos: 12, Blocks: []int32{0}}}
			for _, st := range steps {
				if err := b.Forward(context.Background(), []batch.SeqStep{st}, [][]float32{lg}); err != nil {
					t.Fatal(err)
				}
				for i, v := range lg {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("logit %d = %g", i, v)
					}
				}
			}
		})
	}
}

// TestPresetShapes pins the real-model presets to the shapes they are
// named after.
func TestPresetShapes(t *testing.T) {
	type shape struct {
		Arch                                      string
		Dim, Layers, Heads, KVHeads, HeadDim, FFN int
		Vocab, Window, SWAPattern                 int
		Tied                                      bool
	}
	for _, tc := range []struct {
		preset string
		want   shape
	}{
		{"llama-3.2-1b", shape{"llama", 2048, 16, 32, 8, 0, 8192, 32000, 0, 0, true}},
		{"qwen3-0.6b", shape{"qwen3", 1024, 28, 16, 8, 128, 3072, 32000, 0, 0, true}},
		{"qwen3-1.7b", shape{"qwen3", 2048, 28, 16, 8, 128, 6144, 32000, 0, 0, true}},
		{"gemma3-270m", shape{"gemma3", 640, 18, 4, 1, 256, 2048, 32000, 512, 0, true}},
		{"gemma3-1b", shape{"gemma3", 1152, 26, 4, 1, 256, 6912, 32000, 512, 0, true}},
	} {
		c, err := llama.Preset(tc.preset)
		if err != nil {
			t.Fatal(err)
		}
		got := shape{c.Arch, c.Dim, c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.FFN, c.VocabSize, c.Window, c.SWAPattern, c.TiedOutput}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.preset, diff)
		}
	}
}
