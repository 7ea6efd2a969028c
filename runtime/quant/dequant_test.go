package quant

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/gguf"
)

type dequantCheck struct {
	Type   string   `json:"type"`
	Ne     []uint64 `json:"ne"`
	SHA256 string   `json:"sha256_dequant_f32le"`
}

// TestDequantizeSynthBitExact dequantizes every tensor of every synth-256
// file and compares the sha256 of the float32 output with ggml's.
func TestDequantizeSynthBitExact(t *testing.T) {
	checksPath := shareddata.Path(t, "synth/checks/dequant-synth-256.json")
	raw, err := os.ReadFile(checksPath)
	if err != nil {
		t.Fatal(err)
	}
	var checks map[string]map[string]dequantCheck
	if err := json.Unmarshal(raw, &checks); err != nil {
		t.Fatal(err)
	}
	seen := map[gguf.Type]bool{}
	for _, name := range sortedKeys(checks) {
		t.Run(name, func(t *testing.T) {
			checkDequantFile(t, shareddata.Path(t, filepath.Join("synth/models", name)), checks[name], seen)
		})
	}
	// The types the synth-256 files lack (IQ4_NL, IQ4_XS, MXFP4), on the
	// synth/arch2 files that hold them (dequant_iq4_test.go).
	for _, name := range sortedKeys(arch2DequantSHA256) {
		t.Run(name, func(t *testing.T) {
			cs := map[string]dequantCheck{}
			for _, c := range arch2DequantSHA256[name] {
				cs[c.tensor] = dequantCheck{Type: c.typ, SHA256: c.sha256}
			}
			checkDequantFile(t, shareddata.Path(t, filepath.Join("synth/arch2/models", name)), cs, seen)
		})
	}
	for typ := range dequantizers {
		if !seen[typ] {
			t.Errorf("type %v never checked against ggml", typ)
		}
	}
}

// checkDequantFile dequantizes the tensors of the GGUF file at path that
// checks names and compares the sha256 of each float32 output with the
// check's; it marks the types it checked in seen.
func checkDequantFile(t *testing.T, path string, checks map[string]dequantCheck, seen map[gguf.Type]bool) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for tname, c := range checks {
		ti, ok := f.Tensor(tname)
		if !ok {
			t.Errorf("%s: tensor missing", tname)
			continue
		}
		if raceEnabled && seen[ti.Type] {
			continue // under -race one tensor per type is enough
		}
		if ti.Type.String() != c.Type {
			t.Errorf("%s: type %v, check says %s", tname, ti.Type, c.Type)
		}
		dst := make([]float32, ti.NumElements())
		if err := Dequantize(ti.Type, ti.Data, dst); err != nil {
			t.Errorf("%s: %v", tname, err)
			continue
		}
		buf := make([]byte, 4*len(dst))
		for i, v := range dst {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		sum := sha256.Sum256(buf)
		if got := hex.EncodeToString(sum[:]); got != c.SHA256 {
			t.Errorf("%s (%v %v): sha256 %s, want %s (first values %v)", tname, ti.Type, ti.Dims, got, c.SHA256, dst[:8])
		}
		seen[ti.Type] = true
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestDequantizeBadSizes(t *testing.T) {
	for typ := range dequantizers {
		bl, bs := typ.BlockLen(), typ.BlockSize()
		cases := []struct {
			name  string
			nsrc  int
			ndst  int
			valid bool
		}{
			{"empty", 0, 0, true},
			{"one block", bs, bl, true},
			{"three blocks", 3 * bs, 3 * bl, true},
			{"short src", bs - 1, bl, false},
			{"long src", bs + 1, bl, false},
			{"no src", 0, bl, false},
			{"partial dst", 2 * bs, 2*bl - 1, bl == 1},
			{"dst not whole block", bs, bl + 1, false},
			{"src for two, dst one", 2 * bs, bl, false},
		}
		if bl == 1 {
			cases[6].nsrc = (2*bl - 1) * bs
		}
		for _, c := range cases {
			err := Dequantize(typ, make([]byte, c.nsrc), make([]float32, c.ndst))
			if c.valid && err != nil {
				t.Errorf("%v %s: unexpected error %v", typ, c.name, err)
			}
			if !c.valid && !errors.Is(err, ErrSize) {
				t.Errorf("%v %s: got %v, want ErrSize", typ, c.name, err)
			}
		}
	}
	for _, typ := range []gguf.Type{gguf.TypeQ8_1, gguf.TypeQ8_K, gguf.Type(99)} {
		if err := Dequantize(typ, make([]byte, 1024), make([]float32, 256)); !errors.Is(err, ErrType) {
			t.Errorf("%v: got %v, want ErrType", typ, err)
		}
	}
}
