package gguf

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weft-inference/weft/internal/shareddata"
)

func TestOpenStories(t *testing.T) {
	f, err := Open(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, want := f.Arch(), "llama"; got != want {
		t.Errorf("Arch() = %q, want %q", got, want)
	}
	for key, want := range map[string]uint64{
		"llama.embedding_length":        64,
		"llama.block_count":             5,
		"llama.attention.head_count":    8,
		"llama.attention.head_count_kv": 4,
	} {
		got, ok := f.Uint(key)
		if !ok || got != want {
			t.Errorf("Uint(%q) = %d, %v; want %d", key, got, ok, want)
		}
	}
	toks, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(toks) != 512 {
		t.Fatalf("tokens: %d, %v; want 512", len(toks), ok)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		t.Fatal("no token_embd.weight")
	}
	if diff := cmp.Diff([]uint64{64, 512}, emb.Dims); diff != "" {
		t.Errorf("token_embd dims (-want +got):\n%s", diff)
	}
	if emb.Type != TypeF32 || len(emb.Data) != 64*512*4 {
		t.Errorf("token_embd: type %v, %d bytes", emb.Type, len(emb.Data))
	}
}

func TestOpenSynthTypes(t *testing.T) {
	for _, name := range []string{"F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_S", "Q4_K_M", "Q5_K_M", "Q6_K"} {
		f, err := Open(shareddata.Path(t, "synth/models/synth-256-"+name+".gguf"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, ti := range f.Tensors {
			rb, err := ti.Type.RowBytes(int(ti.Dims[0]))
			if err != nil {
				t.Errorf("%s %s: %v", name, ti.Name, err)
				continue
			}
			if want := uint64(rb) * ti.NumElements() / ti.Dims[0]; uint64(len(ti.Data)) != want {
				t.Errorf("%s %s: %d bytes, want %d", name, ti.Name, len(ti.Data), want)
			}
		}
		f.Close()
	}
}

// TestIQ4Traits: the block layouts of the 4-bit non-linear types, as
// ggml's type traits give them (ggml.c: blck_size, type_size).
func TestIQ4Traits(t *testing.T) {
	tests := []struct {
		typ             Type
		id              uint32
		name            string
		blockLen, bytes int
	}{
		{TypeIQ4_NL, 20, "IQ4_NL", 32, 18},
		{TypeIQ4_XS, 23, "IQ4_XS", 256, 136},
		{TypeMXFP4, 39, "MXFP4", 32, 17},
	}
	for _, tc := range tests {
		if uint32(tc.typ) != tc.id || tc.typ.String() != tc.name || tc.typ.BlockLen() != tc.blockLen || tc.typ.BlockSize() != tc.bytes {
			t.Errorf("%v: id %d, %d values in %d bytes; want %s id %d, %d in %d",
				tc.typ, uint32(tc.typ), tc.typ.BlockLen(), tc.typ.BlockSize(), tc.name, tc.id, tc.blockLen, tc.bytes)
		}
		if got, err := tc.typ.RowBytes(2 * tc.blockLen); err != nil || got != 2*tc.bytes {
			t.Errorf("%v: RowBytes(%d) = %d, %v; want %d", tc.typ, 2*tc.blockLen, got, err, 2*tc.bytes)
		}
		if _, err := tc.typ.RowBytes(tc.blockLen + 1); err == nil {
			t.Errorf("%v: RowBytes(%d) gave no error", tc.typ, tc.blockLen+1)
		}
	}
}

// TestOpenArch2Types opens the synth/arch2 files that hold IQ4_NL,
// IQ4_XS and MXFP4 tensors (3-D MXFP4 experts too) and checks every
// tensor's size against its type's layout.
func TestOpenArch2Types(t *testing.T) {
	for _, name := range []string{"qwen3-256-IQ4_NL", "qwen3-256-IQ4_XS", "gptoss-256-MXFP4_MOE"} {
		f, err := Open(shareddata.Path(t, "synth/arch2/models/synth-"+name+".gguf"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, ti := range f.Tensors {
			rb, err := ti.Type.RowBytes(int(ti.Dims[0]))
			if err != nil {
				t.Errorf("%s %s: %v", name, ti.Name, err)
				continue
			}
			if want := uint64(rb) * ti.NumElements() / ti.Dims[0]; uint64(len(ti.Data)) != want {
				t.Errorf("%s %s: %d bytes, want %d", name, ti.Name, len(ti.Data), want)
			}
		}
		f.Close()
	}
}

func TestWriterRoundTrip(t *testing.T) {
	w := NewWriter()
	w.AddKV("general.architecture", "llama")
	w.AddKV("a.u32", uint32(7))
	w.AddKV("a.f32", float32(1.5))
	w.AddKV("a.bool", true)
	w.AddKV("a.strs", []string{"x", "", "zz"})
	w.AddKV("a.i32s", []int32{-1, 2})
	w.AddKV("a.f64", 2.25)
	data := make([]byte, 34*2)
	for i := range data {
		data[i] = byte(i)
	}
	if err := w.AddTensor("t.q8", TypeQ8_0, []uint64{32, 2}, data); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("t.f32", TypeF32, []uint64{3}, make([]byte, 12)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("bad", TypeQ8_0, []uint64{31}, nil); err == nil {
		t.Error("AddTensor accepted a row that is not a whole block")
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 {
		t.Errorf("version %d", f.Version)
	}
	got := map[string]any{}
	for _, kv := range f.KVs {
		got[kv.Key] = kv.Value
	}
	want := map[string]any{
		"general.architecture": "llama", "a.u32": uint32(7), "a.f32": float32(1.5), "a.bool": true,
		"a.strs": []string{"x", "", "zz"}, "a.i32s": []int32{-1, 2}, "a.f64": 2.25,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	q, _ := f.Tensor("t.q8")
	if !bytes.Equal(q.Data, data) || q.Offset%32 != 0 {
		t.Errorf("t.q8 data or offset %d wrong", q.Offset)
	}
	f32, _ := f.Tensor("t.f32")
	if len(f32.Data) != 12 || f32.Offset%32 != 0 {
		t.Errorf("t.f32: %d bytes at %d", len(f32.Data), f32.Offset)
	}
}

// Every truncation of a real file must fail cleanly (or, past the last
// tensor's end, succeed), never panic.
func TestTruncated(t *testing.T) {
	data, err := os.ReadFile(shareddata.Path(t, "models/stories260K-Q4_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	end := f.DataOffset
	for _, ti := range f.Tensors {
		if e := f.DataOffset + ti.Offset + uint64(len(ti.Data)); e > end {
			end = e
		}
	}
	for n := 0; n < len(data); n += 1 + n/64 {
		_, err := Parse(data[:n])
		if uint64(n) < end && err == nil {
			t.Fatalf("Parse of %d/%d bytes succeeded", n, len(data))
		}
		if err != nil && !errors.Is(err, ErrFormat) {
			t.Fatalf("Parse of %d bytes: error %v does not wrap ErrFormat", n, err)
		}
	}
}

func TestHostileCounts(t *testing.T) {
	hdr := func(ver uint32, nt, nkv uint64) []byte {
		b := []byte(Magic)
		b = append(b, byte(ver), byte(ver>>8), byte(ver>>16), byte(ver>>24))
		for _, v := range []uint64{nt, nkv} {
			for i := 0; i < 8; i++ {
				b = append(b, byte(v>>(8*i)))
			}
		}
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"bad magic", []byte("GGML\x03\x00\x00\x00")},
		{"version 1", hdr(1, 0, 0)},
		{"version 4", hdr(4, 0, 0)},
		{"big-endian", hdr(3<<24, 0, 0)},
		{"huge kv count", hdr(3, 0, 1<<62)},
		{"huge tensor count", hdr(3, 1<<40, 0)},
		{"huge string", append(hdr(3, 0, 1), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)},
	} {
		if _, err := Parse(tc.data); err == nil {
			t.Errorf("%s: Parse succeeded", tc.name)
		}
	}
	if _, err := Parse(hdr(3, 0, 0)); err != nil {
		t.Errorf("empty v3 file: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	w := NewWriter()
	w.AddKV("general.architecture", "llama")
	w.AddKV("k.arr", []uint32{1, 2, 3})
	w.AddKV("k.strs", []string{"a", "b"})
	_ = w.AddTensor("t", TypeQ4_0, []uint64{32, 1}, make([]byte, 18))
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		for _, ti := range file.Tensors {
			if len(ti.Data) > len(data) {
				t.Fatalf("tensor %q larger than the file", ti.Name)
			}
		}
	})
}
