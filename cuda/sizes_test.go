package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/llama"
	"github.com/weft-inference/weft/runtime/quant"
)

func TestAttnSplit(t *testing.T) {
	tests := []struct{ maxLen, want int }{
		{0, 1}, {1, 1}, {128, 1}, // one piece
		{129, 2}, {256, 2},
		{257, 4}, // three pieces: the grid rounds up to four
		{513, 8}, {2048, 16},
		{100000, 16}, // capped
	}
	for _, tc := range tests {
		if got := attnSplit(tc.maxLen); got != tc.want {
			t.Errorf("attnSplit(%d) = %d, want %d", tc.maxLen, got, tc.want)
		}
	}
}

func TestSizes(t *testing.T) {
	hp := llama.HParams{Dim: 4096, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336, VocabSize: 128256}
	w := newWorkspace(hp, 1, 1)
	if w.logits != 4*128256 || w.x != 4*4096 || w.qkv != 4*(4096+2*1024) {
		t.Errorf("workspace for one token = %+v", w)
	}
	if WorkspaceBytes(hp, 10, 1) <= WorkspaceBytes(hp, 1, 1) {
		t.Error("workspace does not grow with tokens")
	}
}

func TestCheckModel(t *testing.T) {
	m := tinyModelNoT(gguf.TypeF16)
	if err := checkModel(m); err != nil {
		t.Fatalf("valid model: %v", err)
	}
	if got, want := WeightBytes(m), int64(96*64*2)*2+4*64+2*(2*(64*64+32*64*2+64*64+128*64*3)+4*128); got != want {
		t.Errorf("WeightBytes = %d, want %d", got, want)
	}
	bad := []struct {
		name string
		edit func(m *llama.Model)
		want string
	}{
		{"unsupported type", func(m *llama.Model) { m.Layers[1].Wo.Type = gguf.TypeQ5_K }, "not supported"},
		{"wrong shape", func(m *llama.Model) { m.Layers[0].Wk.Rows = 64 }, "blk.0.attn_k"},
		{"short data", func(m *llama.Model) { m.Output.Data = m.Output.Data[:10] }, "output holds"},
		{"odd head dim", func(m *llama.Model) { m.HP.HeadDim = 15 }, "head dim"},
		{"gqa ratio", func(m *llama.Model) { m.HP.KVHeads = 3 }, "kv heads"},
		{"bias length", func(m *llama.Model) { m.Layers[0].Bq = make([]float32, 3) }, "biases"},
		{"qwen3 q/k norms", func(m *llama.Model) {
			m.HP.Arch = "qwen3"
			m.Layers[1].QNorm, m.Layers[1].KNorm = make([]float32, 16), make([]float32, 16)
		}, "q/k RMS norms (architecture qwen3) is not implemented"},
		{"gemma3 embedding scale", func(m *llama.Model) { m.HP.EmbedScale = 8 }, "embedding scaling"},
		{"gemma3 q scale", func(m *llama.Model) { m.HP.QScale, m.HP.AttnScale = 0.25, 1 }, "attention scale"},
		{"gelu", func(m *llama.Model) { m.HP.Act = llama.ActGELUTanh }, "gelu-tanh activation"},
		{"softcap", func(m *llama.Model) { m.HP.FinalSoftcap = 30 }, "softcapping"},
		{"post norms", func(m *llama.Model) { m.Layers[0].PostFFNNorm = make([]float32, 64) }, "post-attention"},
		{"window", func(m *llama.Model) { m.Layers[0].Window = 8 }, "sliding-window"},
		{"rope base", func(m *llama.Model) { m.Layers[0].RopeBase = 1e6 }, "rope bases"},
		{"qwen3moe experts", func(m *llama.Model) {
			m.HP.Arch = "qwen3moe"
			m.HP.MoE = llama.MoEParams{Experts: 8, Used: 2, FFN: 32}
		}, "mixture-of-experts FFN (architecture qwen3moe) is not implemented"},
		{"MoE layer", func(m *llama.Model) { m.Layers[1].MoE = &llama.MoELayer{} }, "mixture-of-experts"},
		{"gpt-oss yarn", func(m *llama.Model) { m.HP.Yarn = &llama.YaRN{Factor: 32} }, "YaRN"},
		{"gpt-oss sinks", func(m *llama.Model) { m.Layers[0].Sinks = make([]float32, 4) }, "attention sinks"},
		{"gpt-oss output bias", func(m *llama.Model) { m.Layers[0].Bo = make([]float32, 64) }, "output bias"},
	}
	for _, tc := range bad {
		m := tinyModelNoT(gguf.TypeF16)
		tc.edit(m)
		if err := checkModel(m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: checkModel = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// tinyModelNoT has the right shapes and byte counts for a small model; the
// values are zeros (checkModel and the fake driver do not look at them).
func tinyModelNoT(typ gguf.Type) *llama.Model {
	hp := llama.HParams{Arch: "llama", VocabSize: 96, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 128, ContextLen: 256, RopeBase: 10000, NormEps: 1e-5}
	w := func(rows, cols int) quant.Weight {
		rb, _ := typ.RowBytes(cols)
		return quant.Weight{Type: typ, Rows: rows, Cols: cols, Data: make([]byte, rows*rb)}
	}
	m := &llama.Model{HP: hp, TokEmbd: w(96, 64), OutNorm: make([]float32, 64), Output: w(96, 64)}
	for range hp.Layers {
		m.Layers = append(m.Layers, llama.Layer{
			AttnNorm: make([]float32, 64), FFNNorm: make([]float32, 64),
			Wq: w(64, 64), Wk: w(32, 64), Wv: w(32, 64), Wo: w(64, 64),
			WGate: w(128, 64), WUp: w(128, 64), WDown: w(64, 128),
		})
	}
	return m
}

// TestCheckModelArch2 loads real GGUFs: a llama model passes checkModel
// (the loader's per-layer rope base and attention scale are the plain
// ones), and qwen3 and gemma3 are refused before any upload with an error
// wrapping llama.ErrUnsupported that names the missing feature.
func TestCheckModelArch2(t *testing.T) {
	for _, tc := range []struct {
		file, want string
	}{
		{"models/stories260K.gguf", ""},
		{"synth/arch/models/synth-qwen2-256-F16.gguf", ""},
		{"synth/arch2/models/synth-qwen3-256-F16.gguf", "per-head q/k RMS norms (architecture qwen3)"},
		{"synth/arch2/models/synth-gemma3-256-F16.gguf", "input embedding scaling (architecture gemma3)"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := gguf.Open(shareddata.Path(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := llama.FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			err = checkModel(m)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("checkModel = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, llama.ErrUnsupported)):
				t.Errorf("checkModel = %v, want an ErrUnsupported naming %q", err, tc.want)
			}
		})
	}
}
