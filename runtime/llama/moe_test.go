package llama

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/gguf"
)

func openArch2(t *testing.T, name string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(shareddata.Path(t, "synth/arch2/models/"+name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestMoELoad loads the MoE models of shared/synth/arch2 and checks the
// hyper-parameters (arch2/README.md's values and llama.cpp's hard-coded
// gating and activation), the per-expert views of the stacked tensors and
// gpt-oss's extra tensors and per-layer windows.
func TestMoELoad(t *testing.T) {
	tests := []struct {
		file   string
		moe    MoEParams
		yarn   *YaRN
		oai    bool
		window []int
		ffnTyp gguf.Type // of the experts' gate matrices
	}{
		{"synth-qwen3moe-256-F32.gguf", MoEParams{Experts: 8, Used: 2, FFN: 128, Gating: GatingSoftmax, Norm: true}, nil, false,
			[]int{0, 0, 0, 0}, gguf.TypeF32},
		{"synth-qwen3moe-256-Q4_K_M.gguf", MoEParams{Experts: 8, Used: 2, FFN: 128, Gating: GatingSoftmax, Norm: true}, nil, false,
			[]int{0, 0, 0, 0}, gguf.TypeQ4_K},
		{"synth-gptoss-256-Q8_0.gguf", MoEParams{Experts: 8, Used: 2, FFN: 64, Gating: GatingTopKSoftmax, SwiGLUAlpha: 1.702, SwiGLULimit: 7},
			// AttnFactor: (1 + 0.1 ln 8) / (1 + 0.1 ln 8) in float32.
			&YaRN{Factor: 8, OrigContextLen: 64, BetaFast: 32, BetaSlow: 1, ExtFactor: 1, AttnFactor: yarnAttn8()}, true,
			[]int{8, 0, 8, 0}, gguf.TypeQ8_0},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			m, err := FromGGUF(openArch2(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.moe, m.HP.MoE); d != "" {
				t.Errorf("MoEParams (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.yarn, m.HP.Yarn); d != "" {
				t.Errorf("YaRN (-want +got):\n%s", d)
			}
			hp := m.HP
			var window []int
			for i, l := range m.Layers {
				window = append(window, l.Window)
				ml := l.MoE
				if ml == nil {
					t.Fatalf("layer %d: no MoE", i)
				}
				if l.WGate.Data != nil || l.WUp.Data != nil || l.WDown.Data != nil {
					t.Errorf("layer %d: dense FFN weights loaded beside the experts", i)
				}
				if ml.Router.Rows != hp.MoE.Experts || ml.Router.Cols != hp.Dim || ml.Router.Type != gguf.TypeF32 {
					t.Errorf("layer %d: router %dx%d %v", i, ml.Router.Rows, ml.Router.Cols, ml.Router.Type)
				}
				if len(ml.Gate) != 8 || len(ml.Up) != 8 || len(ml.Down) != 8 {
					t.Fatalf("layer %d: %d/%d/%d experts", i, len(ml.Gate), len(ml.Up), len(ml.Down))
				}
				if g := ml.Gate[0]; g.Type != tc.ffnTyp || g.Rows != hp.MoE.FFN || g.Cols != hp.Dim {
					t.Errorf("layer %d: expert gate %dx%d %v", i, g.Rows, g.Cols, g.Type)
				}
				// Expert e's view is the e-th slice of the stacked tensor.
				st, _ := openArch2(t, tc.file).Tensor(blk(i) + "ffn_down_exps.weight")
				sz := len(st.Data) / 8
				for e, w := range ml.Down {
					if w.Rows != hp.Dim || w.Cols != hp.MoE.FFN || !bytes.Equal(w.Data, st.Data[e*sz:(e+1)*sz]) {
						t.Errorf("layer %d expert %d: down view %dx%d is not slice %d of the stacked tensor", i, e, w.Rows, w.Cols, e)
					}
				}
				gotOAI := ml.RouterBias != nil && ml.GateBias != nil && l.Sinks != nil && l.Bo != nil && l.Bq != nil
				if gotOAI != tc.oai {
					t.Errorf("layer %d: gpt-oss biases and sinks loaded = %v, want %v", i, gotOAI, tc.oai)
				}
				if tc.oai && (len(l.Sinks) != hp.Heads || len(ml.DownBias[7]) != hp.Dim || len(ml.UpBias[7]) != hp.MoE.FFN) {
					t.Errorf("layer %d: %d sinks, down bias %d, up bias %d", i, len(l.Sinks), len(ml.DownBias[7]), len(ml.UpBias[7]))
				}
				if tc.oai && l.RopeBase != hp.RopeBase {
					t.Errorf("layer %d: rope base %g, want the global %g", i, l.RopeBase, hp.RopeBase)
				}
			}
			if d := cmp.Diff(tc.window, window); d != "" {
				t.Errorf("windows (-want +got):\n%s", d)
			}
		})
	}
}

func blk(i int) string { return "blk." + string(rune('0'+i)) + "." }

func yarnAttn8() float32 {
	a := float32(float32(0.1)*logf(8)) + 1
	return a * (1 / float32(1+float32(float32(0.1)*logf(8))))
}

// TestMoELoadErrors rewrites synth-gptoss-256-F32 (and qwen3moe) with one
// thing wrong and expects a clear error, never a panic.
func TestMoELoadErrors(t *testing.T) {
	tests := []struct {
		name, file string
		kv         map[string]any // replaced or added keys
		drop       string         // tensor left out
		reshape    string         // tensor whose last dimension is halved
		want       string
	}{
		{"used above count", "synth-qwen3moe-256-F32.gguf", map[string]any{"qwen3moe.expert_used_count": uint32(9)}, "", "", "uses 9 of 8 experts"},
		{"no expert count", "synth-qwen3moe-256-F32.gguf", map[string]any{"qwen3moe.expert_count": "eight"}, "", "", "expert_count"},
		{"shared experts", "synth-qwen3moe-256-F32.gguf", map[string]any{"qwen3moe.expert_shared_count": uint32(1)}, "", "", "shared experts"},
		{"missing experts", "synth-qwen3moe-256-F32.gguf", nil, "blk.1.ffn_up_exps.weight", "", "blk.1.ffn_up_exps.weight is missing"},
		{"experts short", "synth-qwen3moe-256-F32.gguf", nil, "", "blk.2.ffn_gate_exps.weight", "ffn_gate_exps.weight has shape [256 128 4]"},
		{"missing sinks", "synth-gptoss-256-F32.gguf", nil, "blk.0.attn_sinks.weight", "", "attn_sinks.weight is missing"},
		{"missing router bias", "synth-gptoss-256-F32.gguf", nil, "blk.3.ffn_gate_inp.bias", "", "ffn_gate_inp.bias is missing"},
		{"expert biases short", "synth-gptoss-256-F32.gguf", nil, "", "blk.0.ffn_down_exps.bias", "ffn_down_exps.bias has shape [256 4]"},
		{"yarn factor", "synth-gptoss-256-F32.gguf", map[string]any{"gpt-oss.rope.scaling.factor": float32(0.5)}, "", "", "rope.scaling.factor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := openArch2(t, tc.file)
			w := gguf.NewWriter()
			seen := map[string]bool{}
			for _, kv := range src.KVs {
				v := kv.Value
				if nv, ok := tc.kv[kv.Key]; ok {
					v, seen[kv.Key] = nv, true
				}
				w.AddKV(kv.Key, v)
			}
			for k, v := range tc.kv {
				if !seen[k] {
					w.AddKV(k, v)
				}
			}
			for _, ti := range src.Tensors {
				if ti.Name == tc.drop {
					continue
				}
				dims, data := ti.Dims, ti.Data
				if ti.Name == tc.reshape {
					dims = append([]uint64(nil), dims...)
					dims[len(dims)-1] /= 2
					data = data[:len(data)/2]
				}
				if err := w.AddTensor(ti.Name, ti.Type, dims, data); err != nil {
					t.Fatal(err)
				}
			}
			var buf bytes.Buffer
			if _, err := w.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Parse(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			_, err = FromGGUF(f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("FromGGUF = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// tinyMoE is a small MoE config for load tests: 64 wide, 2 layers, 4
// experts of 32 (2 used), a generated 300-token vocabulary.
func tinyMoE(arch string, typ gguf.Type) GenConfig {
	c := GenConfig{Name: "tiny-" + arch, Arch: arch, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 96, ContextLen: 256,
		VocabSize: 300, Type: typ, Seed: 5, MoE: &MoEGen{Experts: 4, Used: 2, FFN: 32}}
	if arch == "qwen3moe" {
		c.HeadDim = 32 // twice Dim/Heads, as Qwen3's
	} else {
		c.Window, c.MoE.YarnFactor, c.MoE.YarnOrigContext = 8, 4, 64
	}
	return c
}

// TestGenerateMoE writes tiny qwen3moe and gpt-oss models of each
// gen-model type and loads them back: the loader must find what the
// generator meant (experts, gating, windows, YaRN), and the same config
// gives the same bytes.
func TestGenerateMoE(t *testing.T) {
	for _, arch := range []string{"qwen3moe", "gpt-oss"} {
		for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeMXFP4} {
			t.Run(arch+"/"+typ.String(), func(t *testing.T) {
				c := tinyMoE(arch, typ)
				if typ == gguf.TypeMXFP4 { // MXFP4_MOE: experts MXFP4, the rest Q8_0
					c = tinyMoE(arch, gguf.TypeQ8_0)
					c.ExpertsMXFP4 = true
				}
				var a, b bytes.Buffer
				if err := Generate(c, &a); err != nil {
					t.Fatal(err)
				}
				if err := Generate(c, &b); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a.Bytes(), b.Bytes()) {
					t.Error("two runs of the same config differ")
				}
				f, err := gguf.Parse(a.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				m, err := FromGGUF(f)
				if err != nil {
					t.Fatal(err)
				}
				want := MoEParams{Experts: 4, Used: 2, FFN: 32, Gating: GatingSoftmax, Norm: true}
				wantWindow := []int{0, 0}
				if arch == "gpt-oss" {
					want = MoEParams{Experts: 4, Used: 2, FFN: 32, Gating: GatingTopKSoftmax, SwiGLUAlpha: 1.702, SwiGLULimit: 7}
					wantWindow = []int{8, 0}
					if m.HP.Yarn == nil || m.HP.Yarn.Factor != 4 || m.HP.Yarn.OrigContextLen != 64 {
						t.Errorf("YaRN %+v, want factor 4 over 64 positions", m.HP.Yarn)
					}
				} else if m.HP.HeadDim != 32 || m.Layers[0].QNorm == nil {
					t.Errorf("head dim %d, q norm %v: want 32 and q/k norms", m.HP.HeadDim, m.Layers[0].QNorm != nil)
				}
				if d := cmp.Diff(want, m.HP.MoE); d != "" {
					t.Errorf("MoEParams (-want +got):\n%s", d)
				}
				var window []int
				for _, l := range m.Layers {
					window = append(window, l.Window)
					if l.MoE == nil || l.MoE.Gate[3].Type != typ || l.MoE.Down[1].Type != typ {
						t.Fatalf("experts not loaded as %v", typ)
					}
					if c.ExpertsMXFP4 && l.Wq.Type != gguf.TypeQ8_0 {
						t.Fatalf("attention %v, want Q8_0 beside MXFP4 experts", l.Wq.Type)
					}
				}
				if d := cmp.Diff(wantWindow, window); d != "" {
					t.Errorf("windows (-want +got):\n%s", d)
				}
			})
		}
	}
}

// TestMoEPresets checks the gen-model MoE presets' sizes (about 1.5B
// parameters, 0.2-0.35B used per token) and that a copy scaled down to
// two layers and a generated vocabulary generates and loads.
func TestMoEPresets(t *testing.T) {
	for _, name := range []string{"qwen3moe-1.5b", "gptoss-1.5b"} {
		t.Run(name, func(t *testing.T) {
			c, err := Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			total, active := MoEParamCounts(c)
			t.Logf("%s: %.3gB parameters, %.3gB per token", name, float64(total)/1e9, float64(active)/1e9)
			if total < 1.3e9 || total > 1.7e9 || active < 0.2e9 || active > 0.35e9 {
				t.Errorf("%d parameters, %d per token: want about 1.5B and 0.3B", total, active)
			}
			c.Layers, c.VocabSize, c.MoE.Experts = 2, 300, 2*c.MoE.Used
			// As written, and in gen-model's Q4_K_M mix (Q6_K output,
			// and attention V and expert down on llama.cpp's layers).
			for _, q4km := range []bool{false, true} {
				if q4km {
					c.Type, c.MoreBitsQ6K = gguf.TypeQ4_K, true
				}
				var buf bytes.Buffer
				if err := Generate(c, &buf); err != nil {
					t.Fatal(err)
				}
				f, err := gguf.Parse(buf.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				m, err := FromGGUF(f)
				if err != nil {
					t.Fatal(err)
				}
				// Of 2 layers, use_more_bits picks the last.
				last := m.Layers[len(m.Layers)-1].MoE
				if q4km && (m.Output.Type != gguf.TypeQ6_K || last.Down[0].Type != gguf.TypeQ6_K || last.Gate[0].Type != gguf.TypeQ4_K ||
					m.Layers[0].MoE.Down[0].Type != gguf.TypeQ4_K) {
					t.Errorf("Q4_K_M mix: output %v, last layer's expert down %v and gate %v, first layer's down %v",
						m.Output.Type, last.Down[0].Type, last.Gate[0].Type, m.Layers[0].MoE.Down[0].Type)
				}
			}
		})
	}
}
