package llama

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/quant"
)

// tinyGGUF generates a small model and lets mutate edit the writer's input
// before it is written: it returns the parsed file.
func genTiny(t *testing.T, cfg GenConfig) *gguf.File {
	t.Helper()
	var buf bytes.Buffer
	if err := Generate(cfg, &buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func tinyCfg() GenConfig {
	c, _ := Preset("tiny")
	return c
}

// rewrite copies f into a new GGUF, letting edit change KVs and tensors.
func rewrite(t *testing.T, f *gguf.File, editKV func(gguf.KV) (gguf.KV, bool), editT func(gguf.TensorInfo) (gguf.TensorInfo, bool)) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range f.KVs {
		if kv.Key == "general.alignment" {
			continue
		}
		keep := true
		if editKV != nil {
			kv, keep = editKV(kv)
		}
		if keep {
			w.AddKV(kv.Key, kv.Value)
		}
	}
	for _, ti := range f.Tensors {
		keep := true
		if editT != nil {
			ti, keep = editT(ti)
		}
		if keep {
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
				t.Fatal(err)
			}
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

func TestFromGGUFRefuses(t *testing.T) {
	base := genTiny(t, tinyCfg())
	if _, err := FromGGUF(base); err != nil {
		t.Fatalf("generated model does not load: %v", err)
	}
	tests := []struct {
		name    string
		kv      func(gguf.KV) (gguf.KV, bool)
		tensor  func(gguf.TensorInfo) (gguf.TensorInfo, bool)
		wantMsg string
		unsupp  bool
	}{
		{"unknown architecture", func(kv gguf.KV) (gguf.KV, bool) {
			if kv.Key == "general.architecture" {
				kv.Value = "mamba"
			}
			return kv, true
		}, nil, `"mamba"`, true},
		{"missing tensor", nil, func(ti gguf.TensorInfo) (gguf.TensorInfo, bool) {
			return ti, ti.Name != "blk.1.ffn_up.weight"
		}, "blk.1.ffn_up.weight is missing", false},
		{"wrong shape", nil, func(ti gguf.TensorInfo) (gguf.TensorInfo, bool) {
			if ti.Name == "blk.0.attn_k.weight" { // claim [64 32] as [32 64]
				ti.Dims = []uint64{ti.Dims[1], ti.Dims[0]}
			}
			return ti, true
		}, "blk.0.attn_k.weight has shape", false},
		{"unsupported type", nil, func(ti gguf.TensorInfo) (gguf.TensorInfo, bool) {
			if ti.Name == "output.weight" { // Q8_1 is a known type weft cannot multiply
				ti.Type = gguf.TypeQ8_1
				n := int(ti.Dims[0]*ti.Dims[1]) / 32 * 40
				ti.Data = make([]byte, n)
			}
			return ti, true
		}, "output.weight has type Q8_1", true},
		{"renamed tensor", nil, func(ti gguf.TensorInfo) (gguf.TensorInfo, bool) {
			if ti.Name == "output_norm.weight" {
				ti.Name = "output_norm.bias"
			}
			return ti, true
		}, "output_norm.weight is missing", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := rewrite(t, base, tc.kv, tc.tensor)
			_, err := FromGGUF(f)
			if err == nil {
				t.Fatal("FromGGUF accepted the model")
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
			if tc.unsupp != errors.Is(err, ErrUnsupported) {
				t.Errorf("errors.Is(err, ErrUnsupported) = %v, want %v (%v)", !tc.unsupp, tc.unsupp, err)
			}
		})
	}
}

func TestTiedOutput(t *testing.T) {
	cfg := tinyCfg()
	cfg.TiedOutput = true
	m, err := FromGGUF(genTiny(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	if &m.Output.Data[0] != &m.TokEmbd.Data[0] {
		t.Error("tied model: Output is not the token embedding")
	}
}

func TestLlama3FreqFactors(t *testing.T) {
	hp := HParams{HeadDim: 128, RopeBase: 500000, RopeScaling: &Llama3Scaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContextLen: 8192}}
	f := llama3FreqFactors(hp)
	// High frequencies (short wavelengths) are unscaled, low ones divided by
	// Factor, and the band between moves monotonically from 1 to Factor.
	if f[0] != 1 || f[len(f)-1] != 8 {
		t.Fatalf("factors start %g end %g, want 1 and 8", f[0], f[len(f)-1])
	}
	for i := 1; i < len(f); i++ {
		if f[i] < f[i-1] {
			t.Fatalf("factors not monotonic at %d: %g < %g", i, f[i], f[i-1])
		}
	}
}

func TestGenerateDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	cfg := tinyCfg()
	cfg.Type = gguf.TypeQ4_K
	cfg.Dim, cfg.FFN = 256, 512
	if err := Generate(cfg, &a); err != nil {
		t.Fatal(err)
	}
	if err := Generate(cfg, &b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("same config gave different bytes")
	}
	cfg.Seed++
	b.Reset()
	if err := Generate(cfg, &b); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("different seeds gave the same bytes")
	}
	f, err := gguf.Parse(a.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	m, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if m.Layers[0].Wq.Type != gguf.TypeQ4_K {
		t.Errorf("attn_q type %s, want Q4_K", m.Layers[0].Wq.Type)
	}
}

func TestGenerateRejectsBadShapes(t *testing.T) {
	for _, mod := range []func(*GenConfig){
		func(c *GenConfig) { c.Heads = 5 },
		func(c *GenConfig) { c.KVHeads = 3 },
		func(c *GenConfig) { c.Type = gguf.TypeQ3_K },
		func(c *GenConfig) { c.VocabSize = 100 },
	} {
		c := tinyCfg()
		mod(&c)
		if err := Generate(c, &bytes.Buffer{}); err == nil {
			t.Errorf("Generate accepted %+v", c)
		}
	}
}

func TestLlama3ScalingKeys(t *testing.T) {
	f := rewrite(t, genTiny(t, tinyCfg()), nil, nil)
	w := gguf.NewWriter()
	for _, kv := range f.KVs {
		if kv.Key != "general.alignment" {
			w.AddKV(kv.Key, kv.Value)
		}
	}
	w.AddKV("llama.rope.scaling.type", "llama3")
	w.AddKV("llama.rope.scaling.factor", float32(8))
	w.AddKV("llama.rope.scaling.original_context_length", uint32(64))
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
	m, err := FromGGUF(g)
	if err != nil {
		t.Fatal(err)
	}
	want := &Llama3Scaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContextLen: 64}
	if diff := cmp.Diff(want, m.HP.RopeScaling); diff != "" {
		t.Errorf("scaling (-want +got):\n%s", diff)
	}
	if len(m.RopeFreqs) != m.HP.HeadDim/2 || m.RopeFreqs[0] != 1 || m.RopeFreqs[len(m.RopeFreqs)-1] != 8 {
		t.Errorf("rope freq factors %v", m.RopeFreqs)
	}
}

// TestGenerateIQ4Types: the 4-bit table types generate and load as the
// type of every matrix (gen-model --type IQ4_NL, IQ4_XS, MXFP4).
func TestGenerateIQ4Types(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4} {
		t.Run(typ.String(), func(t *testing.T) {
			cfg := tinyCfg()
			cfg.Type = typ
			cfg.Dim, cfg.FFN = 256, 512
			var a bytes.Buffer
			if err := Generate(cfg, &a); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Parse(a.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			m, err := FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []quant.Weight{m.Layers[0].Wq, m.Layers[1].WDown, m.Layers[1].WGate} {
				if w.Type != typ {
					t.Errorf("matrix type %s, want %s", w.Type, typ)
				}
			}
		})
	}
	cfg := tinyCfg()
	cfg.ExpertsMXFP4 = true
	if err := Generate(cfg, &bytes.Buffer{}); err == nil {
		t.Error("MXFP4 experts accepted for a dense model")
	}
}

func TestFallbackType(t *testing.T) {
	tests := []struct {
		want gguf.Type
		cols int
		got  gguf.Type
	}{
		{gguf.TypeQ4_K, 512, gguf.TypeQ4_K},
		{gguf.TypeQ4_K, 1152, gguf.TypeQ5_0},
		{gguf.TypeQ5_K, 640, gguf.TypeQ5_1},
		{gguf.TypeQ6_K, 1152, gguf.TypeQ8_0},
		{gguf.TypeQ6_K, 6912, gguf.TypeQ6_K},
		{gguf.TypeIQ4_XS, 640, gguf.TypeIQ4_NL},
		{gguf.TypeIQ4_XS, 1024, gguf.TypeIQ4_XS},
		{gguf.TypeQ2_K, 96, gguf.TypeQ4_0},
		{gguf.TypeQ3_K, 96, gguf.TypeQ4_0},
		{gguf.TypeQ4_K, 100, gguf.TypeF16}, // not even 32-value blocks
		{gguf.TypeQ8_0, 100, gguf.TypeF16},
		{gguf.TypeQ8_0, 96, gguf.TypeQ8_0},
		{gguf.TypeF16, 100, gguf.TypeF16},
	}
	for _, tc := range tests {
		if got := FallbackType(tc.want, tc.cols); got != tc.got {
			t.Errorf("FallbackType(%s, %d) = %s, want %s", tc.want, tc.cols, got, tc.got)
		}
	}
}

// TestGenerateFallback: rows of 64 and 192 values are written in the
// 32-block fallback types, rows of 256 in the asked type, each fallback is
// reported, and the file loads.
func TestGenerateFallback(t *testing.T) {
	for _, tc := range []struct {
		typ      gguf.Type
		q6k      bool
		fallback gguf.Type // of the 64-wide rows (attn_q)
		down     gguf.Type // ffn_down of layer 1 (rows of 256)
		v        gguf.Type // attn_v of layer 1
	}{
		{gguf.TypeQ4_K, false, gguf.TypeQ5_0, gguf.TypeQ4_K, gguf.TypeQ5_0},
		{gguf.TypeQ4_K, true, gguf.TypeQ5_0, gguf.TypeQ6_K, gguf.TypeQ8_0}, // Q4_K_M: the last layer has more bits
		{gguf.TypeIQ4_XS, false, gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeIQ4_NL},
	} {
		t.Run(fmt.Sprintf("%s/q6k=%v", tc.typ, tc.q6k), func(t *testing.T) {
			cfg := tinyCfg()
			cfg.Type, cfg.MoreBitsQ6K, cfg.FFN = tc.typ, tc.q6k, 256
			reported := map[string]gguf.Type{}
			cfg.OnFallback = func(name string, want, got gguf.Type, cols int) {
				if cols%want.BlockLen() == 0 || cols%got.BlockLen() != 0 {
					t.Errorf("%s: %s -> %s for rows of %d", name, want, got, cols)
				}
				reported[name] = got
			}
			m, err := FromGGUF(genTiny(t, cfg))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name string
				w    quant.Weight
				want gguf.Type
			}{
				{"blk.0.attn_q.weight", m.Layers[0].Wq, tc.fallback},
				{"blk.1.attn_v.weight", m.Layers[1].Wv, tc.v},
				{"blk.1.ffn_down.weight", m.Layers[1].WDown, tc.down},
			} {
				if c.w.Type != c.want {
					t.Errorf("%s: %s, want %s", c.name, c.w.Type, c.want)
				}
				if got, ok := reported[c.name]; ok != (c.want != tc.typ && !(tc.q6k && c.want == gguf.TypeQ6_K)) || ok && got != c.want {
					t.Errorf("%s: reported %v (%s), written %s", c.name, ok, got, c.want)
				}
			}
		})
	}
}
