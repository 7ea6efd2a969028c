package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/cuda/gpumem"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/scheduler"
)

// startServe runs serve on loopback listeners and returns a client; the
// server stops (and serve's result is checked) at cleanup.
func startServe(t *testing.T, m *runtime.Model, kvType string) (inferencev1.InferenceServiceClient, string, string) {
	t.Helper()
	b, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: kvType, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return startServeDeps(t, serveDeps{Model: m, Backend: b, BackendWhy: "--backend cpu"})
}

// startServeDeps is startServe for a given backend (d.Log defaults to a

// startWhenReady runs start (serve or loadAndServe with its ready channel)
// in a goroutine, waits until it is ready and returns the channel its
// result arrives on; it fails the test if start returns first.
func startWhenReady(t *testing.T, start func(ready chan<- struct{}) error) <-chan error {
	t.Helper()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- start(ready) }() // ends when start returns
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	return done
}

// discarding logger).
func startServeDeps(t *testing.T, d serveDeps) (inferencev1.InferenceServiceClient, string, string) {
	t.Helper()
	return startServeArgs(t, d)
}

// startServeArgs is startServeDeps with more serve flags.
func startServeArgs(t *testing.T, d serveDeps, args ...string) (inferencev1.InferenceServiceClient, string, string) {
	t.Helper()
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mlis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseServeFlags(append([]string{"--backend", "cpu"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := startWhenReady(t, func(ready chan<- struct{}) error {
		return serve(ctx, c, d, lis, mlis, ready)
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve returned %v", err)
		}
	})
	return inferencev1.NewInferenceServiceClient(conn), lis.Addr().String(), mlis.Addr().String()
}

func TestServeBuiltin(t *testing.T) {
	m, err := runtime.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	client, addr, maddr := startServe(t, m, "f16")
	ctx := context.Background()

	if err := runHealthcheck(ctx, []string{"--addr", addr}); err != nil {
		t.Errorf("healthcheck: %v", err)
	}
	s, err := client.Generate(ctx, &inferencev1.GenerateRequest{
		Prompt:   &inferencev1.GenerateRequest_Text{Text: "hello"},
		Stopping: &inferencev1.StoppingCriteria{MaxTokens: 8, IgnoreEos: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var final *inferencev1.Final
	for {
		r, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n += len(r.GetChunk().GetTokenIds())
		if f := r.GetFinal(); f != nil {
			final = f
		}
	}
	if n != 8 || final.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_LENGTH {
		t.Errorf("generated %d tokens, final %v", n, final)
	}
	info, err := client.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{})
	if err != nil || info.GetVocabSize() != int32(m.HP.VocabSize) || info.GetKvCache().GetNumBlocks() == 0 || !strings.HasPrefix(info.GetBackend(), "cpu") {
		t.Errorf("GetModelInfo = %v, %v", info, err)
	}

	var out strings.Builder
	if err := chatLoop(ctx, client, strings.NewReader("hi there\nand again\n"), &out, nil, chatOptions{MaxTokens: 5}); err != nil {
		t.Fatalf("chat: %v", err)
	}
	if strings.Count(out.String(), "> ") != 3 {
		t.Errorf("chat transcript %q: want two replies and a final prompt", out.String())
	}

	resp, err := http.Get("http://" + maddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{"weft_num_requests_running", "weft_kv_cache_usage_perc", "weft_generation_tokens_total", "weft_time_to_first_token_seconds"} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

func TestServeFlags(t *testing.T) {
	c, err := parseServeFlags([]string{"--model", "m.gguf", "--addr", ":1", "--backend", "cuda", "--batching", "static",
		"--batch-size", "4", "--max-seqs", "8", "--kv-memory", "64MiB", "--drain-timeout", "5s", "--log-level", "debug",
		"--max-prompt-bytes", "1MiB"})
	if err != nil {
		t.Fatal(err)
	}
	if c.KVMemory != 64<<20 || c.MaxPromptBytes != 1<<20 || c.BatchSize != 4 || c.Backend != "cuda" || c.Batching != "static" {
		t.Errorf("parsed %+v", c)
	}
	if c.GPUMemUtil != 0.9 {
		t.Errorf("--gpu-memory-utilization default %g, want 0.9", c.GPUMemUtil)
	}
	if c.CUDAEager {
		t.Error("--cuda-eager on by default")
	}
	if c, err := parseServeFlags([]string{"--cuda-eager"}); err != nil || !c.CUDAEager {
		t.Errorf("--cuda-eager: %+v, %v", c.CUDAEager, err)
	}
	if c.KVType != "f16" {
		t.Errorf("--kv-type default %q, want f16", c.KVType)
	}
	if c, err := parseServeFlags([]string{"--kv-type", "q8_0"}); err != nil || c.KVType != "q8_0" || kvBackend(c.Backend, c.KVType) != "cpu" {
		t.Errorf("--kv-type q8_0: %q, %v (backend %q)", c.KVType, err, kvBackend(c.Backend, c.KVType))
	}
	for _, bad := range [][]string{{"--gpu-memory-utilization", "0"}, {"--gpu-memory-utilization", "1.5"}, {"--backend", "tpu"}, {"--batching", "dynamic"}, {"--tls-cert", "x"}, {"--kv-memory", "lots"}, {"--max-prompt-bytes", "-1"},
		{"--kv-type", "q8"}, {"--kv-type", "q8_0", "--backend", "cuda"}} {
		if _, err := parseServeFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	// --backend cuda either gives a CUDA backend or fails clearly (never a
	// silent CPU fallback); --backend auto always gives a backend.
	m, err := runtime.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	log := slog.New(slog.DiscardHandler)
	if b, _, err := newBackend(serveConfig{Backend: "cuda", GPUMemUtil: 0.9}, m, log); err == nil {
		if !strings.HasPrefix(b.Name(), "cuda") {
			t.Errorf("--backend cuda gave %q", b.Name())
		}
		b.Close()
	} else if !strings.Contains(err.Error(), "cuda") {
		t.Errorf("--backend cuda error does not say why: %v", err)
	}
	b, why, err := newBackend(serveConfig{Backend: "auto", GPUMemUtil: 0.9}, m, log)
	if err != nil || why == "" {
		t.Fatalf("--backend auto: %v", err)
	}
	b.Close()
}

// TestServeGoldenStories260K: greedy Generate over gRPC on the real CPU
// runtime streams exactly llama.cpp's tokens, in several messages, with
// n-gram speculation (--spec ngram, whose accepted drafts the metrics
// count) and with a draft model (--spec draft) as without.
func TestServeGoldenStories260K(t *testing.T) {
	m, err := runtime.Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	raw, err := os.ReadFile(shareddata.Path(t, "golden/stories260K-F32.greedy64.kvf32.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Results goldenGen `json:"results"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden.Results) == 0 {
		t.Fatal("no golden prompts")
	}
	for _, spec := range []string{"off", "ngram", "draft"} {
		t.Run("spec-"+spec, func(t *testing.T) {
			b, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: "f32", Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			args := []string{"--spec", spec}
			if spec == "draft" {
				// Its own file as draft model: the greedy drafts are the
				// model's own choices up to rounding, so most are accepted.
				args = append(args, "--draft-model", shareddata.Path(t, "models/stories260K.gguf"))
			}
			client, _, maddr := startServeArgs(t, serveDeps{Model: m, Backend: b, BackendWhy: "--backend cpu"}, args...)
			finalAcc := checkGoldenServe(t, client, golden.Results)
			acc, ok := metric(t, maddr, "weft_spec_accepted_tokens_total")
			if !ok || (spec != "off") != (acc > 0) || acc != float64(finalAcc) {
				t.Errorf("--spec %s: weft_spec_accepted_tokens_total %v (exported %v), Finals' accepted_draft_tokens %d", spec, acc, ok, finalAcc)
			}
		})
	}
}

type goldenGen = []struct {
	Prompt          string  `json:"prompt"`
	PromptTokenIDs  []int32 `json:"prompt_token_ids"`
	GeneratedTokens []int32 `json:"generated_token_ids"`
}

// checkGoldenServe runs every golden prompt through Generate and returns
// the accepted drafts its Finals' timings report.
func checkGoldenServe(t *testing.T, client inferencev1.InferenceServiceClient, results goldenGen) (accepted int) {
	t.Helper()
	for _, g := range results {
		s, err := client.Generate(context.Background(), &inferencev1.GenerateRequest{
			Prompt:   &inferencev1.GenerateRequest_Text{Text: g.Prompt},
			Sampling: &inferencev1.SamplingParams{Temperature: 0},
			Stopping: &inferencev1.StoppingCriteria{MaxTokens: int32(len(g.GeneratedTokens))},
		})
		if err != nil {
			t.Fatal(err)
		}
		var got []int32
		var msgs int
		var final *inferencev1.Final
		for {
			r, err := s.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if c := r.GetChunk(); c != nil {
				msgs++
				got = append(got, c.GetTokenIds()...)
			}
			if f := r.GetFinal(); f != nil {
				final = f
			}
		}
		if diff := cmp.Diff(g.GeneratedTokens, got); diff != "" {
			t.Errorf("%q: tokens (-llama.cpp +weft):\n%s", g.Prompt, diff)
		}
		if final.GetUsage().GetPromptTokens() != int32(len(g.PromptTokenIDs)) {
			t.Errorf("%q: %d prompt tokens, llama.cpp %d", g.Prompt, final.GetUsage().GetPromptTokens(), len(g.PromptTokenIDs))
		}
		if msgs < 2 {
			t.Errorf("%q: %d chunk messages, want several", g.Prompt, msgs)
		}
		tm := final.GetTimings()
		if tm.GetAcceptedDraftTokens() > tm.GetDraftTokens() {
			t.Errorf("%q: %d drafts accepted of %d", g.Prompt, tm.GetAcceptedDraftTokens(), tm.GetDraftTokens())
		}
		accepted += int(tm.GetAcceptedDraftTokens())
	}
	return accepted
}

// fakeGPU is a CPU backend dressed as a GPU one: it offers an admission gate
// over a fake NVML source (memoryWatcher) and a settable health
// (healthReporter), the two things serve takes from the CUDA backend.
type fakeGPU struct {
	*cpu.Backend
	gate      scheduler.Capacity
	cols      []prometheus.Collector
	unhealthy atomic.Pointer[string]
}

func (f *fakeGPU) MemoryGate() scheduler.Capacity           { return f.gate }
func (f *fakeGPU) MemoryCollectors() []prometheus.Collector { return f.cols }
func (f *fakeGPU) Healthy() (bool, string) {
	if r := f.unhealthy.Load(); r != nil {
		return false, *r
	}
	return true, ""
}

// fakeSource is a GPU whose free memory the test sets.
type fakeSource struct {
	free  atomic.Uint64
	reads atomic.Int64
}

func (s *fakeSource) Snapshot() (gpumem.Info, error) {
	s.reads.Add(1)
	f := s.free.Load()
	return gpumem.Info{Name: "fake", Total: 1000, Free: f, Used: 1000 - f}, nil
}

func newFakeGPU(t *testing.T, m *runtime.Model, src gpumem.Source) *fakeGPU {
	t.Helper()
	b, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: "f16", Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	f := &fakeGPU{Backend: b}
	if src != nil {
		gate, err := gpumem.NewGate(src, gpumem.GateConfig{PauseBelow: 100, ResumeAbove: 200, Interval: time.Nanosecond}, nil)
		if err != nil {
			t.Fatal(err)
		}
		f.gate = gate
		f.cols = []prometheus.Collector{gpumem.NewCollector(src), gate}
	}
	return f
}

// metric returns the value of an unlabelled sample (or the first sample of
// a labelled one) from a /metrics scrape.
func metric(t *testing.T, maddr, name string) (float64, bool) {
	t.Helper()
	resp, err := http.Get("http://" + maddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		return v, err == nil
	}
	return 0, false
}

// waitFor polls cond every 10ms for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestServeGPUMemoryGate: with free GPU memory below the margin a request
// waits (admission paused, nothing fails); once memory is back above the
// resume threshold it is admitted and finishes normally. The NVML gauges and
// the gate's metrics are on /metrics.
func TestServeGPUMemoryGate(t *testing.T) {
	m, err := runtime.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	src := &fakeSource{}
	src.free.Store(50) // below PauseBelow: paused from the first reading
	client, _, maddr := startServeDeps(t, serveDeps{Model: m, Backend: newFakeGPU(t, m, src)})

	s, err := client.Generate(context.Background(), &inferencev1.GenerateRequest{
		Prompt:   &inferencev1.GenerateRequest_Text{Text: "hello"},
		Stopping: &inferencev1.StoppingCriteria{MaxTokens: 4, IgnoreEos: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		n     int
		final *inferencev1.Final
		err   error
	}
	got := make(chan result, 1)
	go func() {
		var r result
		for {
			msg, err := s.Recv()
			if err != nil {
				if err != io.EOF {
					r.err = err
				}
				got <- r
				return
			}
			r.n += len(msg.GetChunk().GetTokenIds())
			if f := msg.GetFinal(); f != nil {
				r.final = f
			}
		}
	}()
	waitFor(t, "the request to wait behind the paused gate", func() bool {
		w, ok1 := metric(t, maddr, "weft_num_requests_waiting")
		p, ok2 := metric(t, maddr, "weft_gpu_admission_paused")
		return ok1 && ok2 && w == 1 && p == 1
	})
	// The scheduler keeps asking the gate while it waits.
	before := src.reads.Load()
	waitFor(t, "the gate to be asked again", func() bool { return src.reads.Load() > before+2 })
	select {
	case r := <-got:
		t.Fatalf("request ended while admission was paused: %+v", r)
	default:
	}
	if v, ok := metric(t, maddr, "weft_gpu_memory_free_bytes"); !ok || v != 50 {
		t.Errorf("weft_gpu_memory_free_bytes = %v (%v), want 50", v, ok)
	}

	src.free.Store(150) // above PauseBelow but below ResumeAbove: still paused
	waitFor(t, "the gate to read 150", func() bool {
		v, ok := metric(t, maddr, "weft_gpu_memory_free_bytes")
		return ok && v == 150
	})
	src.free.Store(500) // above ResumeAbove: resumes
	var r result
	select {
	case r = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("request not admitted after free memory recovered")
	}
	if r.err != nil || r.n != 4 || r.final.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_LENGTH {
		t.Errorf("after resuming: %d tokens, final %v, err %v", r.n, r.final, r.err)
	}
	if v, ok := metric(t, maddr, "weft_gpu_admission_pauses_total"); !ok || v != 1 {
		t.Errorf("weft_gpu_admission_pauses_total = %v (%v), want 1", v, ok)
	}
	if v, ok := metric(t, maddr, "weft_gpu_admission_paused"); !ok || v != 0 {
		t.Errorf("weft_gpu_admission_paused = %v (%v), want 0", v, ok)
	}
}

// TestServeUnhealthyBackend: a backend reporting a sticky error turns the
// health service NOT_SERVING.
func TestServeUnhealthyBackend(t *testing.T) {
	m, err := runtime.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b := newFakeGPU(t, m, nil)
	_, addr, _ := startServeDeps(t, serveDeps{Model: m, Backend: b, HealthPoll: 5 * time.Millisecond})
	ctx := context.Background()
	if err := runHealthcheck(ctx, []string{"--addr", addr}); err != nil {
		t.Fatalf("healthy backend: healthcheck %v", err)
	}
	reason := "cuda: CUDA_ERROR_ILLEGAL_ADDRESS in attention"
	b.unhealthy.Store(&reason)
	waitFor(t, "NOT_SERVING", func() bool {
		err := runHealthcheck(ctx, []string{"--addr", addr})
		return err != nil && strings.Contains(err.Error(), "NOT_SERVING")
	})
}

// TestServeFallbackReason: when CUDA fails under --backend auto, the CPU
// backend runs and GetModelInfo says why.
func TestServeFallbackReason(t *testing.T) {
	m, err := runtime.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	saved := newCUDABackend
	t.Cleanup(func() { newCUDABackend = saved })
	newCUDABackend = func(*runtime.Model, cudaOptions, *slog.Logger) (batch.Backend, error) {
		return nil, errors.New("cuInit: CUDA_ERROR_NO_DEVICE")
	}
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		backend, why string
	}{
		{"auto", "--backend auto: CUDA unavailable: cuInit: CUDA_ERROR_NO_DEVICE"},
		{"cpu", "--backend cpu"},
	} {
		c, err := parseServeFlags([]string{"--backend", tc.backend, "--kv-memory", "1MiB"})
		if err != nil {
			t.Fatal(err)
		}
		b, why, err := newBackend(c, m, log)
		if err != nil {
			t.Fatalf("--backend %s: %v", tc.backend, err)
		}
		t.Cleanup(func() { b.Close() })
		if why != tc.why {
			t.Errorf("--backend %s: why %q, want %q", tc.backend, why, tc.why)
		}
		client, _, _ := startServeDeps(t, serveDeps{Model: m, Backend: b, BackendWhy: why})
		info, err := client.GetModelInfo(context.Background(), &inferencev1.GetModelInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if want := b.Name() + "; " + tc.why; info.GetBackend() != want {
			t.Errorf("--backend %s: GetModelInfo backend %q, want %q", tc.backend, info.GetBackend(), want)
		}
	}
	if _, _, err := newBackend(serveConfig{Backend: "cuda", GPUMemUtil: 0.9}, m, log); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_NO_DEVICE") {
		t.Errorf("--backend cuda with no device: %v", err)
	}
}

// TestServeDraftModelRefused: --spec draft and --draft-model go together,
// and a draft model with another vocabulary than the target's is refused
// (the built-in model's against stories260K's); the same vocabulary in
// another weight type is taken.
func TestServeDraftModelRefused(t *testing.T) {
	for _, args := range [][]string{{"--spec", "draft"}, {"--draft-model", "x.gguf"}, {"--spec", "ngram", "--draft-model", "x.gguf"}} {
		if _, err := parseServeFlags(args); err == nil || !strings.Contains(err.Error(), "--draft-model") {
			t.Errorf("%q: err %v, want one about --draft-model", args, err)
		}
	}
	log := slog.New(slog.DiscardHandler)
	kv := batch.KVInfo{BlockSize: 16, NumBlocks: 64}
	c, err := parseServeFlags([]string{"--spec", "draft", "--draft-model", shareddata.Path(t, "models/stories260K-Q4_0.gguf")})
	if err != nil {
		t.Fatal(err)
	}
	builtin, err := runtime.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer builtin.Close()
	if _, _, err := loadDraftModel(c, builtin, kv, log); err == nil || !strings.Contains(err.Error(), "share a vocabulary") {
		t.Errorf("a draft model with another vocabulary: %v", err)
	}
	m, err := runtime.Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	d, closeDraft, err := loadDraftModel(c, m, kv, log)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDraft()
	if d.FreeBlocks() != 64 {
		t.Errorf("draft pool of %d blocks, want the target's 64", d.FreeBlocks())
	}
}
