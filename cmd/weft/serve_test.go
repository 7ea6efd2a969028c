package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/llama"
)

// startServe runs serve on loopback listeners and returns a client; the
// server stops (and serve's result is checked) at cleanup.
func startServe(t *testing.T, m *runtime.Model, kvType string) (inferencev1.InferenceServiceClient, string, string) {
	t.Helper()
	b, err := m.NewCPUBackend(llama.CPUConfig{BlockSize: 16, KVType: kvType, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mlis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseServeFlags([]string{"--backend", "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, c, serveDeps{Model: m, Backend: b, Log: slog.New(slog.DiscardHandler)}, lis, mlis, ready)
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
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
	if err := chatLoop(ctx, client, strings.NewReader("hi there\nand again\n"), &out, chatOptions{MaxTokens: 5}); err != nil {
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
		"--batch-size", "4", "--max-seqs", "8", "--kv-memory", "64MiB", "--drain-timeout", "5s", "--log-level", "debug"})
	if err != nil {
		t.Fatal(err)
	}
	if c.KVMemory != 64<<20 || c.BatchSize != 4 || c.Backend != "cuda" || c.Batching != "static" {
		t.Errorf("parsed %+v", c)
	}
	for _, bad := range [][]string{{"--backend", "tpu"}, {"--batching", "dynamic"}, {"--tls-cert", "x"}, {"--kv-memory", "lots"}} {
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
	if b, err := newBackend(serveConfig{Backend: "cuda"}, m, log); err == nil {
		if !strings.HasPrefix(b.Name(), "cuda") {
			t.Errorf("--backend cuda gave %q", b.Name())
		}
		b.Close()
	} else if !strings.Contains(err.Error(), "cuda") {
		t.Errorf("--backend cuda error does not say why: %v", err)
	}
	b, err := newBackend(serveConfig{Backend: "auto"}, m, log)
	if err != nil {
		t.Fatalf("--backend auto: %v", err)
	}
	b.Close()
}

// TestServeGoldenStories260K: greedy Generate over gRPC on the real CPU
// runtime streams exactly llama.cpp's tokens, in several messages.
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
		Results []struct {
			Prompt          string  `json:"prompt"`
			PromptTokenIDs  []int32 `json:"prompt_token_ids"`
			GeneratedTokens []int32 `json:"generated_token_ids"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden.Results) == 0 {
		t.Fatal("no golden prompts")
	}
	client, _, _ := startServe(t, m, "f32")
	for _, g := range golden.Results {
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
	}
}
