package llama

import (
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
