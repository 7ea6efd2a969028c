package cpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/llama"
)

// TestQwen2MatchesPermutedLlama checks the qwen2 path (NEOX rotation, QKV
// biases): a qwen2 model whose q/k rows are the llama model's rows permuted
// from adjacent pairs (2i, 2i+1) to halves (i, i+d/2), with zero biases,
// computes the same attention and so the same logits; a non-zero bias then
// changes them.
func TestQwen2MatchesPermutedLlama(t *testing.T) {
	base := genTiny(t) // F32 weights
	lm, err := llama.FromGGUF(base)
	if err != nil {
		t.Fatal(err)
	}
	hd := lm.HP.HeadDim
	permute := func(ti gguf.TensorInfo) gguf.TensorInfo {
		cols, rows := int(ti.Dims[0]), int(ti.Dims[1])
		rb := cols * 4
		out := make([]byte, len(ti.Data))
		for r := range rows {
			h, i := r/hd, r%hd
			var nr int
			if i%2 == 0 {
				nr = h*hd + i/2
			} else {
				nr = h*hd + hd/2 + i/2
			}
			copy(out[nr*rb:(nr+1)*rb], ti.Data[r*rb:(r+1)*rb])
		}
		ti.Data = out
		return ti
	}
	build := func(bias float32) *llama.Model {
		f := rewrite(t, base, func(kv gguf.KV) (gguf.KV, bool) {
			if kv.Key == "general.architecture" {
				kv.Value = "qwen2"
			}
			kv.Key = strings.Replace(kv.Key, "llama.", "qwen2.", 1)
			return kv, true
		}, func(ti gguf.TensorInfo) (gguf.TensorInfo, bool) {
			if strings.HasSuffix(ti.Name, "attn_q.weight") || strings.HasSuffix(ti.Name, "attn_k.weight") {
				ti = permute(ti)
			}
			return ti, true
		})
		m, err := llama.FromGGUF(f)
		if err == nil {
			t.Fatal("qwen2 without biases loaded")
		}
		// Add the biases.
		w := gguf.NewWriter()
		for _, kv := range f.KVs {
			if kv.Key != "general.alignment" {
				w.AddKV(kv.Key, kv.Value)
			}
		}
		for _, ti := range f.Tensors {
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
				t.Fatal(err)
			}
		}
		for l := range lm.HP.Layers {
			for _, n := range []string{"q", "k", "v"} {
				rows := lm.HP.KVHeads * hd
				if n == "q" {
					rows = lm.HP.Heads * hd
				}
				vals := make([]float32, rows)
				if n == "v" {
					for i := range vals {
						vals[i] = bias
					}
				}
				data := f32Bytes(vals)
				if err := w.AddTensor(fmt.Sprintf("blk.%d.attn_%s.bias", l, n), gguf.TypeF32, []uint64{uint64(rows)}, data); err != nil {
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
		if m, err = llama.FromGGUF(g); err != nil {
			t.Fatal(err)
		}
		if !m.HP.RopeNeox || m.HP.Arch != "qwen2" {
			t.Fatalf("qwen2 hparams %+v", m.HP)
		}
		return m
	}
	prompt := []int32{1, 300, 301, 302, 303, 304, 305, 306, 307}
	run := func(m *llama.Model) [][]float32 {
		b, err := New(m, Config{KVType: "f32", BlockSize: 16, NumBlocks: 4})
		if err != nil {
			t.Fatal(err)
		}
		_, lg := greedy(t, b, prompt, 8, nil)
		return lg
	}
	want := run(lm)
	got := run(build(0))
	for i := range want {
		if d := maxAbs(got[i], want[i]); d > 1e-4 {
			t.Fatalf("step %d: qwen2 (permuted) logits differ from llama by %g", i, d)
		}
	}
	biased := run(build(0.5))
	if d := maxAbs(biased[0], want[0]); d < 1e-3 {
		t.Errorf("a V bias of 0.5 changed the logits by only %g", d)
	}
}

// genTiny generates the built-in tiny model (F32 weights) and parses it.
func genTiny(t *testing.T) *gguf.File {
	t.Helper()
	cfg, err := llama.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := llama.Generate(cfg, &buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// rewrite copies f into a new GGUF, letting editKV and editT change its
// KVs and tensors.
func rewrite(t *testing.T, f *gguf.File, editKV func(gguf.KV) (gguf.KV, bool), editT func(gguf.TensorInfo) (gguf.TensorInfo, bool)) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range f.KVs {
		if kv.Key == "general.alignment" {
			continue
		}
		if kv, keep := editKV(kv); keep {
			w.AddKV(kv.Key, kv.Value)
		}
	}
	for _, ti := range f.Tensors {
		if ti, keep := editT(ti); keep {
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

// f32Bytes is vals as little-endian F32 tensor data.
func f32Bytes(vals []float32) []byte {
	out := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}
