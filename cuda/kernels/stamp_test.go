package kernels

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestStampCurrent fails when a kernel source changed after kernels.fatbin
// was built: run scripts/cuda-build.sh and commit both files. It hashes the
// way scripts/cuda-build.sh does: "name\n" + content per file, names sorted.
func TestStampCurrent(t *testing.T) {
	var names []string
	for _, pat := range []string{"*.cu", "*.cuh"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, m...)
	}
	slices.Sort(names)
	h := sha256.New()
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(n + "\n"))
		h.Write(b)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if want := SourcesHash(); got != want {
		t.Fatalf("kernel sources hash %s, kernels.stamp says %s: the fatbin is stale; run scripts/cuda-build.sh", got, want)
	}
}

func TestFatbin(t *testing.T) {
	// A fatbin starts with the magic 0xBA55ED50 (little endian).
	if len(Fatbin) < 16 || Fatbin[0] != 0x50 || Fatbin[1] != 0xED || Fatbin[2] != 0x55 || Fatbin[3] != 0xBA {
		t.Fatalf("Fatbin does not start with the fatbin magic: % x", Fatbin[:min(8, len(Fatbin))])
	}
	if len(Fatbin) > 10<<20 {
		t.Errorf("Fatbin is %d bytes, over 10 MB", len(Fatbin))
	}
	for _, k := range []string{"dequant_f16", "embed", "rmsnorm_f16", "add_bias", "rope", "kv_write", "swiglu", "add", "attention", "attention_reduce", "argmax_logprob", "gemv_f16"} {
		if !containsName(Fatbin, k) {
			t.Errorf("Fatbin has no kernel named %q", k)
		}
	}
	if NVCC() == "" {
		t.Error("kernels.stamp has no nvcc line")
	}
}

// containsName looks for name as a NUL-terminated symbol in the fatbin's
// cubins, or as ".entry name(" in its PTX.
func containsName(b []byte, name string) bool {
	return bytes.Contains(b, []byte(name+"\x00")) || bytes.Contains(b, []byte(".entry "+name+"("))
}
