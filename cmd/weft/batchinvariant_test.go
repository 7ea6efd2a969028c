package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/kernels"
)

// closeCounter is a CPU backend standing in for CUDA that counts its Close
// calls, so a refused backend is seen to be released.
type closeCounter struct {
	batch.Backend
	closed *int
}

func (c closeCounter) Name() string { return "fake-cuda" }
func (c closeCounter) Close() error { *c.closed++; return c.Backend.Close() }

// fakeCUDA makes newCUDABackend open a CPU backend named fake-cuda (gpu)
// or fail (no GPU) for the test; it returns the fake's Close count.
func fakeCUDA(t *testing.T, gpu bool) *int {
	t.Helper()
	saved := newCUDABackend
	t.Cleanup(func() { newCUDABackend = saved })
	closed := new(int)
	newCUDABackend = func(m *runtime.Model, _ cudaOptions, _ *slog.Logger) (batch.Backend, error) {
		if !gpu {
			return nil, errors.New("no GPU found")
		}
		b, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, NumBlocks: 8, KVType: "f32"})
		return closeCounter{b, closed}, err
	}
	return closed
}

// TestGenerateBatchInvariant: --batch-invariant turns the setting on while
// weft generate runs (the JSON reads it back), says so in the backend's
// reason, restores it after, and is refused where the CUDA backend would
// run: --backend cuda at once, --backend auto once CUDA opens (and is
// closed again).
func TestGenerateBatchInvariant(t *testing.T) {
	if kernels.BatchInvariant() {
		t.Fatal("batch-invariant before the test")
	}
	tests := []struct {
		name      string
		gpu       bool
		flags     []string
		want      bool   // batch_invariant in the JSON
		wantWhy   string // end of the JSON's backend
		wantErr   string
		wantClose int // Close calls on the fake CUDA backend
	}{
		{name: "off", flags: []string{"--backend", "cpu"}, wantWhy: "; --backend cpu"},
		{name: "cpu", flags: []string{"--backend", "cpu", "--batch-invariant"}, want: true, wantWhy: "; --backend cpu; --batch-invariant"},
		{name: "auto without a GPU", flags: []string{"--batch-invariant"}, want: true,
			wantWhy: "; --backend auto: CUDA unavailable: no GPU found; --batch-invariant"},
		{name: "auto with a GPU", gpu: true, flags: []string{"--batch-invariant"},
			wantErr: "--batch-invariant covers the CPU kernels only, not the CUDA backend's (--backend auto)", wantClose: 1},
		{name: "cuda", gpu: true, flags: []string{"--backend", "cuda", "--batch-invariant"},
			wantErr: "--batch-invariant covers the CPU kernels only, not the CUDA backend's (--backend cuda)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			closed := fakeCUDA(t, tc.gpu)
			var out bytes.Buffer
			args := append([]string{"--prompt", "Hello", "--max-tokens", "3", "--format", "json"}, tc.flags...)
			err := generateCmd(context.Background(), args, &out, io.Discard)
			if kernels.BatchInvariant() {
				t.Error("batch-invariant after weft generate returned")
			}
			if *closed != tc.wantClose {
				t.Errorf("fake CUDA backend closed %d times, want %d", *closed, tc.wantClose)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var res generateResult
			if err := json.Unmarshal(out.Bytes(), &res); err != nil {
				t.Fatal(err)
			}
			if res.BatchInvariant != tc.want || !strings.HasSuffix(res.Backend, tc.wantWhy) {
				t.Errorf("batch_invariant %v, backend %q; want %v, ending %q", res.BatchInvariant, res.Backend, tc.want, tc.wantWhy)
			}
		})
	}
}

// TestBenchEngineBatchInvariant: weft bench --engine --batch-invariant
// measures with the setting on, and refuses --backend cuda.
func TestBenchEngineBatchInvariant(t *testing.T) {
	for _, on := range []bool{false, true} {
		var got struct {
			BatchInvariant bool   `json:"batch_invariant"`
			Backend        string `json:"backend"`
		}
		flags := []string{"--seqs", "2", "--prompt", "8", "--context", "4", "--steps", "1", "--prompt-reps", "1",
			"--bandwidth-gbs", "10", "--gflops", "10", "--int8-gops", "10"}
		if on {
			flags = append(flags, "--batch-invariant")
		}
		runEngineJSON(t, &got, flags...)
		if got.BatchInvariant != on || strings.HasSuffix(got.Backend, "; --batch-invariant") != on {
			t.Errorf("--batch-invariant %v: JSON batch_invariant %v, backend %q", on, got.BatchInvariant, got.Backend)
		}
		if kernels.BatchInvariant() {
			t.Error("batch-invariant after weft bench returned")
		}
	}
	args := []string{"--engine", "--model", shareddata.Path(t, "models/stories260K.gguf"), "--backend", "cuda", "--batch-invariant"}
	if err := runBench(context.Background(), args, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--batch-invariant covers the CPU kernels only") {
		t.Errorf("--backend cuda --batch-invariant: err = %v", err)
	}
}

// TestServeBatchInvariant: weft serve --batch-invariant (or
// WEFT_BATCH_INVARIANT) has the setting on before the model loads and
// restores it when serving ends; the CPU backend's reason says so; CUDA
// is refused, --backend cuda as a flag error and --backend auto once
// CUDA opens.
func TestServeBatchInvariant(t *testing.T) {
	if _, err := parseServeFlags([]string{"--backend", "cuda", "--batch-invariant"}); err == nil || !strings.Contains(err.Error(), "--batch-invariant covers the CPU kernels only") {
		t.Errorf("--backend cuda --batch-invariant: err = %v", err)
	}
	t.Setenv("WEFT_BATCH_INVARIANT", "true")
	c, err := parseServeFlags([]string{"--backend", "cpu", "--kv-memory", "1MiB"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.BatchInvariant {
		t.Fatal("WEFT_BATCH_INVARIANT=true did not set --batch-invariant")
	}

	// The setting is on while the model loads: the load stands in for it
	// and fails, which ends loadAndServe.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var atLoad bool
	errLoad := errors.New("no model in this test")
	load := func(serveConfig, *slog.Logger) (*runtime.Model, error) {
		atLoad = kernels.BatchInvariant()
		return nil, errLoad
	}
	if err := loadAndServe(context.Background(), c, serveDeps{Log: slog.New(slog.DiscardHandler)}, lis, nil, load, nil); !errors.Is(err, errLoad) {
		t.Fatalf("loadAndServe: %v", err)
	}
	if !atLoad {
		t.Error("--batch-invariant: the setting was off when the model loaded")
	}
	if kernels.BatchInvariant() {
		t.Error("batch-invariant after loadAndServe returned")
	}

	m, err := runtime.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	log := slog.New(slog.DiscardHandler)
	fakeCUDA(t, false)
	b, why, err := newBackend(c, m, log)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if want := "--backend cpu; --batch-invariant"; why != want {
		t.Errorf("why %q, want %q", why, want)
	}
	closed := fakeCUDA(t, true)
	c.Backend = "auto"
	if _, _, err := newBackend(c, m, log); err == nil || !strings.Contains(err.Error(), "(--backend auto)") {
		t.Errorf("--backend auto with CUDA and --batch-invariant: err = %v", err)
	}
	if *closed != 1 {
		t.Errorf("refused CUDA backend closed %d times, want 1", *closed)
	}
}
