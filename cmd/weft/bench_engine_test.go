package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/kernels"
)

func TestBenchEngineJSON(t *testing.T) {
	var got struct {
		WeightBytes  int64   `json:"weight_bytes"`
		Bandwidth    float64 `json:"bandwidth_gbs"`
		BandwidthWhy string  `json:"bandwidth_why"`
		Stream       float64 `json:"stream_bandwidth_gbs"`
		Cache        float64 `json:"cache_bandwidth_gbs"`
		LLC          int64   `json:"llc_bytes"`
		Results      []struct {
			Name         string  `json:"name"`
			Seqs         int     `json:"seqs"`
			TokensPerSec float64 `json:"tokens_per_second"`
			Bound        float64 `json:"bound_tokens_per_second"`
			BoundKind    string  `json:"bound"`
		} `json:"results"`
	}
	// The bandwidths are measured; the compute peaks are pinned far above
	// any machine's so that the decode bounds are the bandwidth's (a
	// measured peak can put 3 sequences of stories260K under the compute
	// bound, TestBenchEnginePromptBound covers that one).
	runEngineJSON(t, &got, "--seqs", "1,3", "--prompt", "20", "--context", "5", "--steps", "2",
		"--gflops", "1e9", "--int8-gops", "1e9")
	if len(got.Results) != 3 || got.Results[0].Name != "prompt 20" || got.Results[2].Seqs != 3 {
		t.Fatalf("results %+v", got.Results)
	}
	for _, r := range got.Results {
		if !(r.TokensPerSec > 0) {
			t.Errorf("%s/%d: tokens/s %v", r.Name, r.Seqs, r.TokensPerSec)
		}
	}
	// The bound scales with the sequences sharing one read of the weights.
	for _, r := range got.Results[1:] {
		if r.BoundKind != "bandwidth" {
			t.Errorf("decode %d: bound %q, want bandwidth", r.Seqs, r.BoundKind)
		}
	}
	if b1, b3 := got.Results[1].Bound, got.Results[2].Bound; b1 <= 0 || b3 < 2.99*b1 || b3 > 3.01*b1 {
		t.Errorf("bounds %v and %v: want the 3-sequence bound 3x the 1-sequence one", b1, b3)
	}
	// The bound's bandwidth is the measured one the weights' size calls for.
	wantBW, wantWhy := kernels.Peaks{BandwidthGBs: got.Stream, CacheBandwidthGBs: got.Cache, LLCBytes: got.LLC}.DecodeBandwidth(got.WeightBytes)
	if got.Bandwidth != wantBW || got.BandwidthWhy != wantWhy || !(got.Stream > 0) {
		t.Errorf("bandwidth %v (%q) from streaming %v, in-cache %v, LLC %d; want %v (%q)",
			got.Bandwidth, got.BandwidthWhy, got.Stream, got.Cache, got.LLC, wantBW, wantWhy)
	}
	if err := runBench(context.Background(), []string{"--engine", "--seqs", "0"}, io.Discard, io.Discard); err == nil {
		t.Error("--seqs 0 accepted")
	}
}

// TestBenchEngineBandwidthFlag: --bandwidth-gbs is the bound's bandwidth,
// whatever the cache, and the output says so.
func TestBenchEngineBandwidthFlag(t *testing.T) {
	var got struct {
		Bandwidth    float64 `json:"bandwidth_gbs"`
		BandwidthWhy string  `json:"bandwidth_why"`
	}
	runEngineJSON(t, &got, "--seqs", "1", "--prompt", "8", "--steps", "1", "--prompt-reps", "1",
		"--gflops", "10", "--int8-gops", "10", "--bandwidth-gbs", "7")
	if got.Bandwidth != 7 || got.BandwidthWhy != "--bandwidth-gbs" {
		t.Errorf("bandwidth %v (%q), want 7 (--bandwidth-gbs)", got.Bandwidth, got.BandwidthWhy)
	}
}

// TestBenchEnginePromptBound: a prompt chunk computes logits for its last
// token only, so its compute bound leaves the output matrix out for the
// others (stories260K: 512 x 64 output.weight, 2 FLOP per weight).
func TestBenchEnginePromptBound(t *testing.T) {
	var got struct {
		FLOPs   float64 `json:"flops_per_token"`
		Results []struct {
			Bound     float64 `json:"bound_tokens_per_second"`
			BoundKind string  `json:"bound"`
		} `json:"results"`
	}
	runEngineJSON(t, &got, "--seqs", "1", "--prompt", "20", "--steps", "1", "--prompt-reps", "1",
		"--gflops", "10", "--int8-gops", "10", "--bandwidth-gbs", "1e6")
	if len(got.Results) != 2 {
		t.Fatalf("results %+v", got.Results)
	}
	const outFLOPs = 2 * 512 * 64
	wantDecode := 10e9 / got.FLOPs
	wantPrompt := 10e9 / (got.FLOPs - outFLOPs + outFLOPs/20.0)
	if b := got.Results[1].Bound; math.Abs(b-wantDecode) > 1e-6*wantDecode || got.Results[1].BoundKind != "compute" {
		t.Errorf("decode bound %v (%s), want %v (compute)", b, got.Results[1].BoundKind, wantDecode)
	}
	if b := got.Results[0].Bound; math.Abs(b-wantPrompt) > 1e-6*wantPrompt {
		t.Errorf("prompt bound %v, want %v", b, wantPrompt)
	}
}

// runEngineJSON runs weft bench --engine on stories260K with the given
// flags and --format json, and decodes its output into got.
func runEngineJSON(t *testing.T, got any, flags ...string) {
	t.Helper()
	var out bytes.Buffer
	args := append([]string{"--engine", "--model", shareddata.Path(t, "models/stories260K.gguf"), "--format", "json"}, flags...)
	if err := runBench(context.Background(), args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Bytes(), got); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
}

// TestBenchEngineBackend: --backend picks the backend measured (a CPU
// backend renamed stands in for CUDA) and the JSON says which and why.
func TestBenchEngineBackend(t *testing.T) {
	saved := newCUDABackend
	t.Cleanup(func() { newCUDABackend = saved })
	newCUDABackend = func(m *runtime.Model, o cudaOptions, _ *slog.Logger) (batch.Backend, error) {
		b, err := m.NewCPUBackend(cpu.Config{BlockSize: 32, NumBlocks: o.MaxSeqs * 4})
		return renamed{b, "fake-cuda"}, err
	}
	peaks := []string{"--seqs", "1,2", "--prompt", "8", "--context", "4", "--steps", "2", "--prompt-reps", "1",
		"--bandwidth-gbs", "10", "--gflops", "10", "--int8-gops", "10"}
	for _, tc := range []struct {
		flags                  []string
		wantPrefix, wantSuffix string
	}{
		{[]string{"--weights", "mapped"}, "cpu (", "; --backend cpu; weights mapped (--weights mapped)"},
		{[]string{"--backend", "cuda"}, "fake-cuda; --backend cuda", ""},
		{[]string{"--backend", "auto"}, "fake-cuda; --backend auto", ""},
	} {
		var got struct {
			Backend string                  `json:"backend"`
			Results []struct{ Name string } `json:"results"`
		}
		runEngineJSON(t, &got, append(append([]string(nil), peaks...), tc.flags...)...)
		if !strings.HasPrefix(got.Backend, tc.wantPrefix) || !strings.HasSuffix(got.Backend, tc.wantSuffix) {
			t.Errorf("%q: backend %q, want %q...%q", tc.flags, got.Backend, tc.wantPrefix, tc.wantSuffix)
		}
		if len(got.Results) != 3 {
			t.Errorf("%q: %d results, want 3", tc.flags, len(got.Results))
		}
	}
	if err := runBench(context.Background(), append([]string{"--engine", "--backend", "tpu"}, peaks...), io.Discard, io.Discard); err == nil {
		t.Error("--backend tpu accepted")
	}
}

// TestBenchEngineContextProfile: the JSON states the context and the KV
// bytes one token holds, and --cpuprofile writes a profile of the timed
// decode steps.
func TestBenchEngineContextProfile(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	var got struct {
		Context         int `json:"context"`
		KVBytesPerToken int `json:"kv_bytes_per_token"`
	}
	runEngineJSON(t, &got, "--seqs", "1,2", "--prompt", "8", "--context", "5", "--steps", "2", "--prompt-reps", "1",
		"--bandwidth-gbs", "10", "--gflops", "10", "--int8-gops", "10", "--cpuprofile", prof)
	// stories260K: 5 layers, 4 KV heads of 8 dimensions, F16 keys and values.
	if got.Context != 5 || got.KVBytesPerToken != 5*2*4*8*2 {
		t.Errorf("context %d, kv_bytes_per_token %d; want 5, %d", got.Context, got.KVBytesPerToken, 5*2*4*8*2)
	}
	fi, err := os.Stat(prof)
	if err != nil || fi.Size() == 0 {
		t.Errorf("--cpuprofile wrote no profile: %v", err)
	}
}
