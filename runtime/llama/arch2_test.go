package llama

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/gguf"
)

// TestArch2HParams loads the random-weight models of shared/synth/arch2
// and checks what the loader makes of their metadata (the values
// arch2/README.md lists), and the per-layer properties.
func TestArch2HParams(t *testing.T) {
	tests := []struct {
		file string
		want HParams
		// per layer: q/k norms present, window, rope base
		qkNorm bool
		window []int
		bases  []float32
	}{
		{"synth-qwen3-256-F32.gguf", HParams{Arch: "qwen3", VocabSize: 512, Dim: 256, Layers: 4, Heads: 4, KVHeads: 2,
			HeadDim: 128, FFN: 512, ContextLen: 512, RopeBase: 1e6, RopeNeox: true, NormEps: 1e-6, AttnScale: 1 / float32(11.313708)},
			true, []int{0, 0, 0, 0}, []float32{1e6, 1e6, 1e6, 1e6}},
		{"synth-gemma3-256-F32.gguf", HParams{Arch: "gemma3", VocabSize: 512, Dim: 256, Layers: 6, Heads: 4, KVHeads: 1,
			HeadDim: 128, FFN: 256, ContextLen: 512, RopeBase: 1e6, RopeNeox: true, NormEps: 1e-6,
			EmbedScale: 16, QScale: 1 / float32(11.313708), AttnScale: 1, Act: ActGELUTanh},
			true, []int{8, 8, 8, 8, 8, 0}, []float32{1e4, 1e4, 1e4, 1e4, 1e4, 1e6}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			f, err := gguf.Open(shareddata.Path(t, "synth/arch2/models/"+tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, m.HP); diff != "" {
				t.Errorf("HParams (-want +got):\n%s", diff)
			}
			var window []int
			var bases []float32
			for i, l := range m.Layers {
				if got := l.QNorm != nil && l.KNorm != nil; got != tc.qkNorm {
					t.Errorf("layer %d: q/k norms loaded = %v, want %v", i, got, tc.qkNorm)
				}
				window, bases = append(window, l.Window), append(bases, l.RopeBase)
			}
			if diff := cmp.Diff(tc.window, window); diff != "" {
				t.Errorf("windows (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.bases, bases); diff != "" {
				t.Errorf("rope bases (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGemma3SlidingPattern rewrites the gemma3 file's sliding-window keys:
// the pattern as a period or as one boolean per layer, no window, the swa
// rope base absent (10000, llama.cpp's default) and the 62-layer scale
// rule; bad values are refused.
func TestGemma3SlidingPattern(t *testing.T) {
	f, err := gguf.Open(shareddata.Path(t, "synth/arch2/models/synth-gemma3-256-F32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tests := []struct {
		name    string
		set     map[string]any // keys (without "gemma3.") to set; nil values delete
		windows []int
		bases   []float32
		wantErr string
	}{
		{"default pattern 6", nil, []int{8, 8, 8, 8, 8, 0}, []float32{1e4, 1e4, 1e4, 1e4, 1e4, 1e6}, ""},
		{"period 3", map[string]any{"attention.sliding_window_pattern": uint32(3)},
			[]int{8, 8, 0, 8, 8, 0}, []float32{1e4, 1e4, 1e6, 1e4, 1e4, 1e6}, ""},
		{"period 0: every layer slides", map[string]any{"attention.sliding_window_pattern": uint32(0)},
			[]int{8, 8, 8, 8, 8, 8}, []float32{1e4, 1e4, 1e4, 1e4, 1e4, 1e4}, ""},
		{"booleans", map[string]any{"attention.sliding_window_pattern": []bool{false, true, false, true, true, false}},
			[]int{0, 8, 0, 8, 8, 0}, []float32{1e6, 1e4, 1e6, 1e4, 1e4, 1e6}, ""},
		{"no window key", map[string]any{"attention.sliding_window": nil},
			[]int{0, 0, 0, 0, 0, 0}, []float32{1e6, 1e6, 1e6, 1e6, 1e6, 1e6}, ""},
		{"window 0", map[string]any{"attention.sliding_window": uint32(0)},
			[]int{0, 0, 0, 0, 0, 0}, []float32{1e6, 1e6, 1e6, 1e6, 1e6, 1e6}, ""},
		{"swa base absent", map[string]any{"rope.freq_base_swa": nil, "attention.sliding_window": uint32(512)},
			[]int{512, 512, 512, 512, 512, 0}, []float32{1e4, 1e4, 1e4, 1e4, 1e4, 1e6}, ""},
		{"swa base 5e5", map[string]any{"rope.freq_base_swa": float32(5e5)},
			[]int{8, 8, 8, 8, 8, 0}, []float32{5e5, 5e5, 5e5, 5e5, 5e5, 1e6}, ""},
		{"booleans of the wrong length", map[string]any{"attention.sliding_window_pattern": []bool{true, false}},
			nil, nil, "2 entries for 6 layers"},
		{"pattern a string", map[string]any{"attention.sliding_window_pattern": "6"},
			nil, nil, "neither a period"},
		{"window a float", map[string]any{"attention.sliding_window": float32(8)},
			nil, nil, "not an unsigned integer"},
		{"negative swa base", map[string]any{"rope.freq_base_swa": float32(-1)},
			nil, nil, "freq_base_swa"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			added := map[string]bool{}
			g := rewrite(t, f, func(kv gguf.KV) (gguf.KV, bool) {
				if v, ok := tc.set[strings.TrimPrefix(kv.Key, "gemma3.")]; ok && strings.HasPrefix(kv.Key, "gemma3.") {
					added[kv.Key] = true
					kv.Value = v
					return kv, v != nil
				}
				return kv, true
			}, nil)
			var extra []gguf.KV
			for k, v := range tc.set {
				if !added["gemma3."+k] && v != nil {
					extra = append(extra, gguf.KV{Key: "gemma3." + k, Value: v})
				}
			}
			if len(extra) > 0 {
				g = withKVs(t, g, extra)
			}
			m, err := FromGGUF(g)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FromGGUF = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var windows []int
			var bases []float32
			for _, l := range m.Layers {
				windows, bases = append(windows, l.Window), append(bases, l.RopeBase)
			}
			if diff := cmp.Diff(tc.windows, windows); diff != "" {
				t.Errorf("windows (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.bases, bases); diff != "" {
				t.Errorf("rope bases (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGemma3Scale62 checks llama.cpp's exception: the 62-layer model (Gemma
// 3 27B) scales q by 1/sqrt(n_embd/n_head), every other size by
// 1/sqrt(key_length).
func TestGemma3Scale62(t *testing.T) {
	f, err := gguf.Open(shareddata.Path(t, "synth/arch2/models/synth-gemma3-256-F32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct {
		layers uint32
		want   float32
	}{{6, 1 / float32(11.313708)}, {62, 1 / float32(8)}} {
		g := rewrite(t, f, func(kv gguf.KV) (gguf.KV, bool) {
			if kv.Key == "gemma3.block_count" {
				kv.Value = tc.layers
			}
			return kv, true
		}, nil)
		hp, err := ReadHParams(g)
		if err != nil {
			t.Fatal(err)
		}
		if hp.QScale != tc.want || hp.AttnScale != 1 {
			t.Errorf("%d layers: QScale %g, AttnScale %g; want %g, 1", tc.layers, hp.QScale, hp.AttnScale, tc.want)
		}
	}
}

// withKVs copies f adding kvs.
func withKVs(t *testing.T, f *gguf.File, kvs []gguf.KV) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range f.KVs {
		if kv.Key != "general.alignment" {
			w.AddKV(kv.Key, kv.Value)
		}
	}
	for _, kv := range kvs {
		w.AddKV(kv.Key, kv.Value)
	}
	for _, ti := range f.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return g
}
