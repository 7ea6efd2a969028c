package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/openai"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/scheduler"
)

// serveOpenAI serves stories260K through weft's own OpenAI-compatible
// handler on the CPU runtime.
func serveOpenAI(t *testing.T) (url, model string, sched *scheduler.Scheduler) {
	t.Helper()
	m, err := runtime.Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: "f32", NumBlocks: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	kv := b.KV()
	ctxLen := min(m.HP.ContextLen, kv.NumBlocks*kv.BlockSize)
	sched, err = scheduler.New(scheduler.Config{
		BlockSize: kv.BlockSize, NumBlocks: kv.NumBlocks, MaxSeqs: 8, MaxWaiting: 16, ContextLen: ctxLen,
		NewDecoder: func() scheduler.TextDecoder { return m.Tok.NewStreamDecoder() },
		IsEOG:      m.Tok.IsEOG, VocabSize: m.HP.VocabSize,
	}, runtime.NewEngine(b, m.HP.VocabSize))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { // ends at cleanup
		defer close(runDone)
		sched.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-runDone })
	door, err := frontdoor.New(frontdoor.Config{Tokenizer: m.Tok, Chat: chat.Default(), Limits: sched.Limits(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := openai.New(openai.Config{Scheduler: sched, Door: door, Tokenizer: m.Tok, ModelNames: []string{"stories"}, AuthToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	h.SetServing(true)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, "stories", sched
}

// TestRunOpenAIAgainstWeft drives weft's HTTP API with the OpenAI
// protocol: every request completes with exactly its output length, and
// the token totals are the server's usage.
func TestRunOpenAIAgainstWeft(t *testing.T) {
	url, model, sched := serveOpenAI(t)
	cfg := Config{Concurrency: 2, Requests: 6, Warmup: 1, Seed: 3,
		PromptLen: Fixed{N: 8}, OutputLen: Cycle{Lens: []int{6, 20}}, IgnoreEOS: true}
	before := sched.Stats().GenerationTokens
	res, err := RunOpenAI(t.Context(), OpenAIConfig{URL: url, Token: "tok"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if res.Model != model || res.Completed != 6 || res.TotalOutputTokens != 3*6+3*20 {
		t.Errorf("model %q, %d completed, %d output tokens; want %q, 6, 78", res.Model, res.Completed, res.TotalOutputTokens, model)
	}
	if res.TotalInputTokens < 6*8 {
		t.Errorf("%d input tokens for six prompts of 8 words", res.TotalInputTokens)
	}
	if res.TTFT.P50 <= 0 || res.ITL.P50 <= 0 {
		t.Errorf("TTFT %+v, ITL %+v: want measured latencies", res.TTFT, res.ITL)
	}

	// A wrong token is an HTTP 401: the warm-up fails the run.
	if _, err := RunOpenAI(t.Context(), OpenAIConfig{URL: url, Model: model, Token: "wrong"}, cfg); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong token: err = %v, want a 401", err)
	}
	// The run's tokens and the warm-up's are what the scheduler
	// generated (Drained closes at the publish after the last one left).
	sched.Drain()
	<-sched.Drained()
	warm := cfg.OutputLen.Next(nil, -1) // the warm-up request is index -1
	if got := sched.Stats().GenerationTokens - before; got != uint64(res.TotalOutputTokens+warm) {
		t.Errorf("scheduler generated %d tokens, want %d (run) + %d (warm-up)", got, res.TotalOutputTokens, warm)
	}
}

// TestRunOpenAIFailures: a stream without usage, an error event or a
// short output fails the request.
func TestRunOpenAIFailures(t *testing.T) {
	for _, tc := range []struct {
		name, events, want string
	}{
		{"no usage", `{"choices":[{"text":"a","finish_reason":null}]}` + "\n\ndata: " + `{"choices":[{"text":"","finish_reason":"length"}]}`, "without usage"},
		{"error event", `{"error":{"message":"boom"}}`, "boom"},
		{"short", `{"choices":[{"text":"a","finish_reason":"stop"}]}` + "\n\ndata: " + `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`, "want 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", tc.events)
			}))
			defer srv.Close()
			cfg := Config{Concurrency: 1, Requests: 1, PromptLen: Fixed{N: 2}, OutputLen: Fixed{N: 4}, IgnoreEOS: true}
			res, err := RunOpenAI(t.Context(), OpenAIConfig{URL: srv.URL, Model: "m"}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Err(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Err() = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
