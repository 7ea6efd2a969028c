package anthropic

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	oaiopt "github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/openai"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/scheduler"
)

const testToken = "sekrit"

// gatedModel passes steps to the real engine; with gate set, every step
// after the first waits for a value on gate.
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
	client sdk.Client // x-api-key
	chat   oai.Client // the OpenAI door on the same listener
	model  string
	gate   chan struct{}
	finals chan *scheduler.Final
}

// newFixture serves stories260K (its chat template) on the CPU runtime:
// the OpenAI door with this door mounted on its mux, as cmd/weft wires
// them, one Door for both.
func newFixture(t *testing.T, gated bool, opts ...func(*frontdoor.Config, *Config)) *fixture {
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
	gm := &gatedModel{m: runtime.NewEngine(b, m.HP.VocabSize)}
	f := &fixture{model: m.Name, finals: make(chan *scheduler.Final, 64)}
	if gated {
		f.gate = make(chan struct{})
		gm.gate = f.gate
	}
	sched, err := scheduler.New(scheduler.Config{
		BlockSize: kv.BlockSize, NumBlocks: kv.NumBlocks, MaxSeqs: 8, MaxWaiting: 16,
		ContextLen: min(m.HP.ContextLen, kv.NumBlocks*kv.BlockSize),
		NewDecoder: func() scheduler.TextDecoder { return m.Tok.NewStreamDecoder() },
		IsEOG:      m.Tok.IsEOG, VocabSize: m.HP.VocabSize,
	}, gm)
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
	reg := prometheus.NewRegistry()
	dcfg := frontdoor.Config{Tokenizer: m.Tok, Chat: chat.Default(), Limits: sched.Limits(),
		Registry: reg, Logger: slog.New(slog.DiscardHandler)}
	cfg := Config{Scheduler: sched, ModelNames: []string{m.Name}, AuthToken: testToken,
		onFinal: func(fin *scheduler.Final) {
			select {
			case f.finals <- fin:
			default:
			}
		}}
	for _, o := range opts {
		o(&dcfg, &cfg)
	}
	door, err := frontdoor.New(dcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Door = door
	api, err := openai.New(openai.Config{Scheduler: sched, Door: door, Tokenizer: m.Tok, ModelNames: []string{m.Name},
		AuthToken: testToken, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Routes {
		api.Mount(p, h)
	}
	f.h = h
	api.SetServing(true)
	h.SetServing(true)
	f.srv = httptest.NewServer(api)
	t.Cleanup(f.srv.Close)
	f.client = sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(f.srv.URL),
		option.WithAPIKey(testToken), option.WithMaxRetries(0))
	f.chat = oai.NewClient(oaiopt.WithBaseURL(f.srv.URL+"/v1/"), oaiopt.WithAPIKey(testToken), oaiopt.WithMaxRetries(0))
	return f
}

const (
	system = "You tell stories."
	user   = "Tell me about a cat."
)

func (f *fixture) params(maxTokens int64) sdk.MessageNewParams {
	return sdk.MessageNewParams{
		Model:     sdk.Model(f.model),
		System:    []sdk.TextBlockParam{{Text: system}},
		Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(user))},
		MaxTokens: maxTokens,
	}
}

// greedy is temperature 0 (this SDK version has no temperature field).
var greedy = option.WithJSONSet("temperature", 0)

func textOfMessage(m *sdk.Message) string {
	var s strings.Builder
	for _, b := range m.Content {
		s.WriteString(b.Text)
	}
	return s.String()
}

type summary struct {
	Type, Role, StopReason string
	Blocks                 int
	Input, Output          int64
}

func summarize(m *sdk.Message) summary {
	return summary{string(m.Type), string(m.Role), string(m.StopReason), len(m.Content), m.Usage.InputTokens, m.Usage.OutputTokens}
}

// TestMessages: a greedy request, non-streamed and streamed (the SDK's
// accumulation), gives the same message; count_tokens counts its prompt;
// the OpenAI chat door gives the same text for the same conversation.
func TestMessages(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	const maxTokens = 24
	got, err := f.client.Messages.New(ctx, f.params(maxTokens), greedy)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.ID, "msg_") || got.Model != sdk.Model(f.model) || textOfMessage(got) == "" {
		t.Errorf("id %q, model %q, text %q: want msg_..., %q, some text", got.ID, got.Model, textOfMessage(got), f.model)
	}
	if got.StopReason != "max_tokens" && got.StopReason != "end_turn" {
		t.Errorf("stop_reason %q", got.StopReason)
	}

	count, err := f.client.Messages.CountTokens(ctx, sdk.MessageCountTokensParams{
		Model:    sdk.Model(f.model),
		System:   sdk.MessageCountTokensParamsSystemUnion{OfString: sdk.String(system)},
		Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(user))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if count.InputTokens != got.Usage.InputTokens || count.InputTokens == 0 {
		t.Errorf("count_tokens %d, the message's input_tokens %d: want equal, > 0", count.InputTokens, got.Usage.InputTokens)
	}

	s := f.client.Messages.NewStreaming(ctx, f.params(maxTokens), greedy)
	var acc sdk.Message
	var events []string
	for s.Next() {
		ev := s.Current()
		if len(events) == 0 || events[len(events)-1] != ev.Type {
			events = append(events, ev.Type)
		}
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	// The SDK passes pings over (TestStreamWire sees them on the wire).
	wantEvents := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if diff := cmp.Diff(wantEvents, events); diff != "" {
		t.Errorf("event sequence (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(textOfMessage(got), textOfMessage(&acc)); diff != "" {
		t.Errorf("streamed text (-non-streamed +streamed):\n%s", diff)
	}
	if diff := cmp.Diff(summarize(got), summarize(&acc)); diff != "" {
		t.Errorf("streamed message (-non-streamed +streamed):\n%s", diff)
	}

	// The same conversation through the OpenAI chat door, greedy.
	cc, err := f.chat.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{
		Model:               oai.ChatModel(f.model),
		Messages:            []oai.ChatCompletionMessageParamUnion{oai.SystemMessage(system), oai.UserMessage(user)},
		MaxCompletionTokens: oai.Int(maxTokens),
		Temperature:         oai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	wantStop := map[string]string{"length": "max_tokens", "stop": "end_turn"}[cc.Choices[0].FinishReason]
	if diff := cmp.Diff(
		summary{"message", "assistant", wantStop, 1, cc.Usage.PromptTokens, cc.Usage.CompletionTokens},
		summarize(got)); diff != "" {
		t.Errorf("/v1/messages against /v1/chat/completions (-chat +messages):\n%s", diff)
	}
	if diff := cmp.Diff(cc.Choices[0].Message.Content, textOfMessage(got)); diff != "" {
		t.Errorf("greedy text (-chat +messages):\n%s", diff)
	}
}

// TestStopSequence: a stop sequence met ends the message with
// stop_reason stop_sequence and names it.
func TestStopSequence(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	free, err := f.client.Messages.New(ctx, f.params(32), greedy)
	if err != nil {
		t.Fatal(err)
	}
	text := textOfMessage(free)
	if len(text) < 8 {
		t.Fatalf("greedy text %q too short to pick a stop sequence from", text)
	}
	stop := text[4:7]
	p := f.params(32)
	p.StopSequences = []string{stop}
	got, err := f.client.Messages.New(ctx, p, greedy)
	if err != nil {
		t.Fatal(err)
	}
	cut := text[:strings.Index(text, stop)]
	if diff := cmp.Diff([]string{"stop_sequence", stop, cut}, []string{string(got.StopReason), got.StopSequence, textOfMessage(got)}); diff != "" {
		t.Errorf("stop_reason, stop_sequence, text (-want +got):\n%s", diff)
	}
}

// TestErrors: refusals come back as the SDK's error with Anthropic's
// status and error type.
func TestErrors(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	type want struct {
		Status int
		Type   string
		Has    string // in the message
	}
	for _, tc := range []struct {
		name   string
		params sdk.MessageNewParams
		opts   []option.RequestOption
		want   want
	}{
		{"missing max_tokens", f.params(8), []option.RequestOption{option.WithJSONDel("max_tokens")},
			want{400, "invalid_request_error", "max_tokens: is required"}},
		{"zero max_tokens", f.params(0), nil, want{400, "invalid_request_error", "max_tokens"}},
		{"unknown model", func() sdk.MessageNewParams { p := f.params(8); p.Model = "claude-nope"; return p }(), nil,
			want{404, "not_found_error", "claude-nope"}},
		{"bad api key", f.params(8), []option.RequestOption{option.WithAPIKey("wrong")}, want{401, "authentication_error", "API key"}},
		{"bearer token instead of x-api-key", f.params(8),
			[]option.RequestOption{option.WithHeaderDel("x-api-key"), option.WithHeader("Authorization", "Bearer "+testToken), option.WithJSONSet("top_k", -3)},
			want{400, "invalid_request_error", "top_k"}},
		{"tool_result without its tool_use", f.params(8),
			[]option.RequestOption{option.WithJSONSet("messages", []map[string]any{{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "x", "content": "y"}}}})},
			want{400, "invalid_request_error", "messages[0].content[0].tool_use_id"}},
		{"bad role", f.params(8),
			[]option.RequestOption{option.WithJSONSet("messages", []map[string]any{{"role": "system", "content": "hi"}})},
			want{400, "invalid_request_error", "messages[0].role"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.client.Messages.New(ctx, tc.params, tc.opts...)
			var apiErr *sdk.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want *anthropic.Error", err)
			}
			got := want{apiErr.StatusCode, string(apiErr.Type()), tc.want.Has}
			if !strings.Contains(apiErr.Message, tc.want.Has) {
				got.Has = apiErr.Message
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDisconnectCancels: a client that drops mid-stream cancels the
// request; it leaves the batch and its KV blocks return.
func TestDisconnectCancels(t *testing.T) {
	f := newFixture(t, true)
	ctx, cancel := context.WithCancel(t.Context())
	s := f.client.Messages.NewStreaming(ctx, f.params(200), greedy, option.WithJSONSet("top_k", 1))
	if !s.Next() { // message_start: submitted
		t.Fatalf("no first event: %v", s.Err())
	}
	cancel()
	s.Close()
	var fin *scheduler.Final
	for fin == nil {
		select {
		case f.gate <- struct{}{}:
		case fin = <-f.finals:
		}
	}
	if fin.Reason != scheduler.FinishCancelled {
		t.Errorf("finish %v after %d tokens, want cancelled", fin.Reason, fin.CompletionTokens)
	}
	f.sched.Drain()
	<-f.sched.Drained()
	st := f.sched.Stats()
	if diff := cmp.Diff([3]int{0, 0, 0}, [3]int{st.Running, st.Waiting, st.KVBlocksUsed}); diff != "" {
		t.Errorf("running, waiting, KV blocks used after the disconnect (-want +got):\n%s", diff)
	}
}

// TestStreamWire reads a stream's bytes as Anthropic documents them: each
// event an "event:" line naming it and a "data:" line whose JSON type is
// the same name, ping included; the order message_start,
// content_block_start, ping, content_block_delta..., content_block_stop,
// message_delta, message_stop.
func TestStreamWire(t *testing.T) {
	f := newFixture(t, false)
	body := `{"model":"` + f.model + `","max_tokens":6,"temperature":0,"stream":true,` +
		`"system":[{"type":"text","text":"` + system + `"}],"messages":[{"role":"user","content":"` + user + `"}]}`
	req, err := http.NewRequestWithContext(t.Context(), "POST", f.srv.URL+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, ok := strings.CutPrefix(sc.Text(), "event: ")
		if !ok {
			t.Fatalf("line %q, want an event: line", sc.Text())
		}
		if !sc.Scan() {
			t.Fatalf("event %s without data", name)
		}
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		var typ struct{ Type string }
		if !ok || json.Unmarshal([]byte(data), &typ) != nil || typ.Type != name {
			t.Fatalf("event %s: data line %q, want JSON of that type", name, sc.Text())
		}
		if sc.Scan() && sc.Text() != "" {
			t.Fatalf("event %s: %q after the data line, want a blank line", name, sc.Text())
		}
		if len(events) == 0 || events[len(events)-1] != name {
			events = append(events, name)
		}
	}
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestDrain: once draining, a new request is refused with 529
// overloaded_error and Retry-After.
func TestDrain(t *testing.T) {
	f := newFixture(t, false)
	f.h.BeginDrain()
	var resp *http.Response
	_, err := f.client.Messages.New(t.Context(), f.params(8), option.WithResponseInto(&resp))
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want *anthropic.Error", err)
	}
	if diff := cmp.Diff([]string{"529", "overloaded_error", "1"},
		[]string{strconv.Itoa(apiErr.StatusCode), string(apiErr.Type()), apiErr.Response.Header.Get("Retry-After")}); diff != "" {
		t.Errorf("status, type, Retry-After (-want +got):\n%s", diff)
	}
}
