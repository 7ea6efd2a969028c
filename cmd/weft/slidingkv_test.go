package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/cpu"
)

// TestServeSlidingKV: serve lays the CPU pool of a model with sliding
// windows (synth gemma3: five window layers, one global) out in layer
// groups with continuous batching, and the estimate made from the header
// names that pool; static batching keeps one table. Served greedily, the
// windowed pool streams the tokens a pool that keeps every layer's K/V
// streams.
func TestServeSlidingKV(t *testing.T) {
	path := shareddata.Path(t, "synth/arch2/models/synth-gemma3-256-F32.gguf")
	m, err := runtime.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	log := slog.New(slog.DiscardHandler)
	args := []string{"--model", path, "--backend", "cpu", "--kv-memory", "256KiB"}

	c, err := parseServeFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	e, err := estimateMemory(c, path, log)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := newBackend(c, m, log)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	kv := b.KV()
	if len(kv.Windows) != m.HP.Layers || kv.NumBlocks != e.KV.NumBlocks || uint64(kv.BytesPerBlock) != e.KV.BytesPerBlock {
		t.Errorf("backend pool: windows %v, %d blocks of %d bytes; estimated %d blocks of %d bytes",
			kv.Windows, kv.NumBlocks, kv.BytesPerBlock, e.KV.NumBlocks, e.KV.BytesPerBlock)
	}

	cs, err := parseServeFlags(append(args, "--batching", "static"))
	if err != nil {
		t.Fatal(err)
	}
	bs, _, err := newBackend(cs, m, log)
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	if ks := bs.KV(); ks.Windows != nil || ks.BytesPerBlock != int64(m.HP.Layers)*kv.BytesPerBlock {
		t.Errorf("static batching: windows %v, %d bytes per block; want one table, %d layers x %d bytes", ks.Windows, ks.BytesPerBlock, m.HP.Layers, kv.BytesPerBlock)
	}

	raw, err := os.ReadFile(shareddata.Path(t, "synth/arch2/golden/synth-gemma3-256-F32.json"))
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
	keep, err := m.NewCPUBackend(cpu.Config{BlockSize: kv.BlockSize, KVType: kv.Type, NumBlocks: kv.NumBlocks})
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	if keep.KV().Windows != nil {
		t.Fatal("the reference pool has layer groups")
	}
	slideClient, _, _ := startServeArgs(t, serveDeps{Model: m, Backend: b, BackendWhy: "--backend cpu"}, "--kv-memory", "256KiB")
	keepClient, _, _ := startServeArgs(t, serveDeps{Model: m, Backend: keep, BackendWhy: "--backend cpu"}, "--kv-memory", "256KiB")
	for _, g := range golden.Results {
		// Past the window: the prompt and 32 tokens span four windows.
		n := len(g.GeneratedTokens)
		want := greedyTokens(t, keepClient, g.Prompt, n)
		got := greedyTokens(t, slideClient, g.Prompt, n)
		if len(got) != n {
			t.Errorf("%q: %d tokens, want %d", g.Prompt, len(got), n)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q: tokens (-every layer keeps the context +windowed pool):\n%s", g.Prompt, diff)
		}
	}
}

// greedyTokens runs one greedy Generate of n tokens and returns them.
func greedyTokens(t *testing.T, client inferencev1.InferenceServiceClient, prompt string, n int) []int32 {
	t.Helper()
	s, err := client.Generate(context.Background(), &inferencev1.GenerateRequest{
		Prompt:   &inferencev1.GenerateRequest_Text{Text: prompt},
		Sampling: &inferencev1.SamplingParams{Temperature: 0},
		Stopping: &inferencev1.StoppingCriteria{MaxTokens: int32(n), IgnoreEos: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []int32
	for {
		r, err := s.Recv()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatalf("%q: %v", prompt, err)
		}
		got = append(got, r.GetChunk().GetTokenIds()...)
	}
}
