package openai

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/scheduler"
)

const testToken = "sekrit"

// gatedModel passes steps to the real engine; with gate set, every step
// after the first waits for a value on gate (so a test controls how far
// a generation gets).
type gatedModel struct {
	m     scheduler.Model
	gate  chan struct{}
	steps int
}

func (g *gatedModel) Step(ctx context.Context, seqs []batch.SeqStep, samplers []*sample.Sampler) ([]sample.Result, error) {
	g.steps++
	if g.gate != nil && g.steps > 1 {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.m.Step(ctx, seqs, samplers)
}

type fixture struct {
	h      *Handler
	sched  *scheduler.Scheduler
	srv    *httptest.Server
	client oai.Client
	model  string
	gate   chan struct{}
	finals chan *scheduler.Final
	reg    *prometheus.Registry
}

// newFixture serves stories260K on the CPU runtime through httptest; with
// gated, the model waits on f.gate before every step but the first. opts
// change the Door's config and the handler's.
func newFixture(t *testing.T, gated bool, opts ...func(*frontdoor.Config, *Config)) *fixture {
	t.Helper()
	return newSpecFixture(t, gated, scheduler.SpecConfig{}, opts...)
}

// newSpecFixture is newFixture with speculative decoding as spec says; a
// speculating fixture cannot be gated (the gate hides the engine's
// draft verification from the scheduler).
func newSpecFixture(t *testing.T, gated bool, spec scheduler.SpecConfig, opts ...func(*frontdoor.Config, *Config)) *fixture {
	t.Helper()
	speculating := spec.Source != "" && spec.Source != scheduler.SpecOff
	if gated && speculating {
		t.Fatal("a speculating fixture cannot be gated")
	}
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
	eng := runtime.NewEngine(b, m.HP.VocabSize)
	var model scheduler.Model = eng
	f := &fixture{model: m.Name, finals: make(chan *scheduler.Final, 64), reg: prometheus.NewRegistry()}
	if !speculating {
		gm := &gatedModel{m: eng}
		if gated {
			f.gate = make(chan struct{})
			gm.gate = f.gate
		}
		model = gm
	}
	sched, err := scheduler.New(scheduler.Config{
		BlockSize: kv.BlockSize, NumBlocks: kv.NumBlocks, MaxSeqs: 8, MaxWaiting: 16, ContextLen: ctxLen,
		NewDecoder: func() scheduler.TextDecoder { return m.Tok.NewStreamDecoder() },
		IsEOG:      m.Tok.IsEOG, VocabSize: m.HP.VocabSize, Spec: spec,
	}, model)
	if err != nil {
		t.Fatal(err)
	}
	f.sched = sched
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { // ends at cleanup
		defer close(runDone)
		sched.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-runDone })
	cfg := Config{
		Scheduler: sched, Tokenizer: m.Tok, ModelNames: []string{m.Name},
		AuthToken: testToken, Registry: f.reg,
		onFinal: func(_ string, fin *scheduler.Final) {
			select { // tests that read finals read them all; others let them go
			case f.finals <- fin:
			default:
			}
		},
	}
	dcfg := frontdoor.Config{Tokenizer: m.Tok, Chat: chat.Default(), Limits: sched.Limits(), Registry: f.reg, Logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&dcfg, &cfg)
	}
	if cfg.Door, err = frontdoor.New(dcfg); err != nil {
		t.Fatal(err)
	}
	f.h, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.h.SetServing(true)
	f.srv = httptest.NewServer(f.h)
	t.Cleanup(f.srv.Close) // before the scheduler stops (cleanups run last first)
	f.client = oai.NewClient(option.WithBaseURL(f.srv.URL+"/v1/"), option.WithAPIKey(testToken), option.WithMaxRetries(0))
	return f
}

func TestCompletions(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	params := oai.CompletionNewParams{
		Model:       oai.CompletionNewParamsModel(f.model),
		Prompt:      oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once upon a time")},
		MaxTokens:   oai.Int(12),
		Temperature: oai.Float(0),
	}
	params.SetExtraFields(map[string]any{"ignore_eos": true})
	got, err := f.client.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 1 || got.Choices[0].Text == "" {
		t.Fatalf("choices = %+v, want one with text", got.Choices)
	}
	if diff := cmp.Diff(struct {
		Object, Finish string
		Completion     int64
	}{"text_completion", "length", 12}, struct {
		Object, Finish string
		Completion     int64
	}{string(got.Object), string(got.Choices[0].FinishReason), got.Usage.CompletionTokens}); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	if got.Usage.PromptTokens == 0 || got.Usage.TotalTokens != got.Usage.PromptTokens+got.Usage.CompletionTokens {
		t.Errorf("usage = %+v", got.Usage)
	}

	// Streaming the same greedy request gives the same text, chunk by
	// chunk, then the finish reason and (include_usage) the usage.
	params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
	s := f.client.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	var finish string
	var usage oai.CompletionUsage
	chunks := 0
	for s.Next() {
		c := s.Current()
		chunks++
		for _, ch := range c.Choices {
			text.WriteString(ch.Text)
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
		if c.Usage.TotalTokens > 0 {
			usage = c.Usage
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got.Choices[0].Text, text.String()); diff != "" {
		t.Errorf("streamed text (-non-streamed +streamed):\n%s", diff)
	}
	if finish != "length" || usage.CompletionTokens != 12 || chunks < 3 {
		t.Errorf("finish %q, usage %+v, %d chunks; want length, 12 completion tokens, >= 3 chunks", finish, usage, chunks)
	}
}

func TestChatCompletions(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	params := oai.ChatCompletionNewParams{
		Model: oai.ChatModel(f.model),
		Messages: []oai.ChatCompletionMessageParamUnion{
			oai.SystemMessage("You tell stories."),
			oai.UserMessage("Tell me about a cat."),
		},
		MaxCompletionTokens: oai.Int(10),
		Temperature:         oai.Float(0),
	}
	params.SetExtraFields(map[string]any{"ignore_eos": true})
	got, err := f.client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 1 {
		t.Fatalf("choices = %+v", got.Choices)
	}
	c := got.Choices[0]
	if diff := cmp.Diff([]any{"chat.completion", "assistant", "length", int64(10)},
		[]any{string(got.Object), string(c.Message.Role), c.FinishReason, got.Usage.CompletionTokens}); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}

	s := f.client.Chat.Completions.NewStreaming(ctx, params)
	var acc oai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("streamed choices = %+v", acc.Choices)
	}
	if diff := cmp.Diff(c.Message.Content, acc.Choices[0].Message.Content); diff != "" {
		t.Errorf("streamed content (-non-streamed +streamed):\n%s", diff)
	}
	if acc.Choices[0].FinishReason != "length" {
		t.Errorf("streamed finish_reason %q, want length", acc.Choices[0].FinishReason)
	}
}

func TestErrors(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	prompt := oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once")}
	type want struct {
		Status      int
		Type, Param string
		Code        string
	}
	for _, tc := range []struct {
		name   string
		params oai.CompletionNewParams
		opts   []option.RequestOption
		want   want
	}{
		// The sampler's range, as on gRPC (OpenAI documents <= 2; weft
		// takes what sample.Params.Validate takes).
		{"bad temperature", oai.CompletionNewParams{Model: oai.CompletionNewParamsModel(f.model), Prompt: prompt, Temperature: oai.Float(101)}, nil,
			want{400, "invalid_request_error", "temperature", "invalid_value"}},
		{"max_tokens 0", oai.CompletionNewParams{Model: oai.CompletionNewParamsModel(f.model), Prompt: prompt, MaxTokens: oai.Int(0)}, nil,
			want{400, "invalid_request_error", "max_tokens", "invalid_value"}},
		{"logprobs over the sampler's bound", oai.CompletionNewParams{Model: oai.CompletionNewParamsModel(f.model), Prompt: prompt, Logprobs: oai.Int(21)}, nil,
			want{400, "invalid_request_error", "logprobs", "invalid_value"}},
		{"bad top_p", oai.CompletionNewParams{Model: oai.CompletionNewParamsModel(f.model), Prompt: prompt, TopP: oai.Float(1.5)}, nil,
			want{400, "invalid_request_error", "top_p", "invalid_value"}},
		{"token out of range", oai.CompletionNewParams{Model: oai.CompletionNewParamsModel(f.model),
			Prompt: oai.CompletionNewParamsPromptUnion{OfArrayOfTokens: []int64{1, 1 << 20}}}, nil,
			want{400, "invalid_request_error", "prompt", "invalid_value"}},
		{"unknown model", oai.CompletionNewParams{Model: "gpt-4", Prompt: prompt}, nil,
			want{404, "invalid_request_error", "model", "model_not_found"}},
		{"wrong token", oai.CompletionNewParams{Model: oai.CompletionNewParamsModel(f.model), Prompt: prompt},
			[]option.RequestOption{option.WithAPIKey("wrong")},
			want{401, "invalid_request_error", "", "invalid_api_key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.client.Completions.New(ctx, tc.params, tc.opts...)
			var apiErr *oai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want an API error", err)
			}
			got := want{apiErr.StatusCode, apiErr.Type, apiErr.Param, apiErr.Code}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if apiErr.Message == "" {
				t.Error("empty message")
			}
		})
	}
}

// TestHealthAndModels: /health follows SetServing; /v1/models lists the
// one model; while not serving, requests get 503 with Retry-After.
func TestHealthAndModels(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	list, err := f.client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if diff := cmp.Diff([]string{f.model}, ids); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
	health := func() int {
		resp, err := http.Get(f.srv.URL + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := health(); got != 200 {
		t.Errorf("health while serving = %d, want 200", got)
	}
	// The scheme is case-insensitive (RFC 9110), as for gRPC.
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("models with a lower-case scheme: %d, want 200", resp.StatusCode)
	}
	f.h.SetServing(false)
	if got := health(); got != 503 {
		t.Errorf("health while not serving = %d, want 503", got)
	}
	req, _ = http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("models while not serving: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestDisconnectCancels: a client that drops mid-stream cancels its
// request; it leaves the batch (FinishCancelled) and its KV blocks return.
func TestDisconnectCancels(t *testing.T) {
	f := newFixture(t, true)
	ctx, cancel := context.WithCancel(t.Context())
	params := oai.CompletionNewParams{
		Model:       oai.CompletionNewParamsModel(f.model),
		Prompt:      oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once upon a time")},
		MaxTokens:   oai.Int(200),
		Temperature: oai.Float(0),
	}
	params.SetExtraFields(map[string]any{"ignore_eos": true})
	s := f.client.Completions.NewStreaming(ctx, params)
	// The first step (prefill) runs ungated and yields the first token;
	// the stream waits for the next step.
	if !s.Next() {
		t.Fatalf("no first chunk: %v", s.Err())
	}
	cancel()
	s.Close()
	// Let steps run until the scheduler reports the sequence's end: the
	// cancellation reaches the loop before the step after it, so a
	// request that was not cancelled would run to length instead.
	var fin *scheduler.Final
	for fin == nil {
		select {
		case f.gate <- struct{}{}:
		case fin = <-f.finals:
		}
	}
	if fin.Reason != scheduler.FinishCancelled {
		t.Fatalf("finish reason %v after %d tokens, want cancelled", fin.Reason, fin.CompletionTokens)
	}
	if fin.CompletionTokens >= 200 {
		t.Errorf("%d tokens generated; the cancel came too late", fin.CompletionTokens)
	}
	// Drained closes at the publish after the last sequence left, so the
	// stats then are those after the cancellation.
	f.sched.Drain()
	select {
	case <-f.sched.Drained():
	case <-t.Context().Done():
		t.Fatal("the scheduler never drained")
	}
	st := f.sched.Stats()
	if diff := cmp.Diff([3]int{0, 0, 0}, [3]int{st.Running, st.Waiting, st.KVBlocksUsed}); diff != "" {
		t.Errorf("running, waiting, KV blocks used after the disconnect (-want +got):\n%s", diff)
	}
}

// TestDrain: after BeginDrain, /health and new requests get 503 while a
// stream in flight goes on to its end.
func TestDrain(t *testing.T) {
	f := newFixture(t, true)
	ctx := t.Context()
	params := oai.CompletionNewParams{
		Model:       oai.CompletionNewParamsModel(f.model),
		Prompt:      oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once upon a time")},
		MaxTokens:   oai.Int(6),
		Temperature: oai.Float(0),
	}
	params.SetExtraFields(map[string]any{"ignore_eos": true})
	s := f.client.Completions.NewStreaming(ctx, params)
	if !s.Next() {
		t.Fatalf("no first chunk: %v", s.Err())
	}
	f.h.BeginDrain()
	resp, err := http.Get(f.srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("health while draining = %d, want 503", resp.StatusCode)
	}
	_, err = f.client.Completions.New(ctx, params)
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || apiErr.Code != "service_unavailable" {
		t.Errorf("new request while draining: %v, want 503 service_unavailable", err)
	}
	// The stream in flight finishes: feed its steps from another
	// goroutine (it ends when the request's Final is recorded).
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for {
			select {
			case f.gate <- struct{}{}:
			case <-f.finals:
				return
			}
		}
	}()
	finish := ""
	for s.Next() {
		for _, ch := range s.Current().Choices {
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	<-fed
	if finish != "length" {
		t.Errorf("in-flight stream finished with %q, want length", finish)
	}
}
