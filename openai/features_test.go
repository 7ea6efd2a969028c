package openai

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/scheduler"
)

// longPrompt spans several KV blocks (16 tokens each in the fixture).
const longPrompt = "Once upon a time there was a little girl named Lily. She loved to play outside in the park with her friends."

func (f *fixture) completionParams(prompt string, maxTokens int64) oai.CompletionNewParams {
	p := oai.CompletionNewParams{
		Model:     oai.CompletionNewParamsModel(f.model),
		Prompt:    oai.CompletionNewParamsPromptUnion{OfString: oai.String(prompt)},
		MaxTokens: oai.Int(maxTokens),
	}
	p.SetExtraFields(map[string]any{"ignore_eos": true})
	return p
}

// drainFinals returns the finals recorded so far, waiting for want of them.
func (f *fixture) drainFinals(t *testing.T, want int) []*scheduler.Final {
	t.Helper()
	var out []*scheduler.Final
	for len(out) < want {
		select {
		case fin := <-f.finals:
			out = append(out, fin)
		case <-t.Context().Done():
			t.Fatalf("%d finals, want %d", len(out), want)
		}
	}
	return out
}

// TestNChoicesShareThePrefill: n=3 with a seed gives three choices, each
// the text a single request with seed+i gives; the later two choices
// reuse the first one's full prompt blocks, so the prompt is computed
// once plus two partial last blocks.
func TestNChoicesShareThePrefill(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	p := f.completionParams(longPrompt, 8)
	p.N = oai.Int(3)
	p.Seed = oai.Int(7)
	p.Temperature = oai.Float(1)
	got, err := f.client.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	finals := f.drainFinals(t, 3)
	promptLen := finals[0].PromptTokens
	const bs = 16
	shared := (promptLen - 1) / bs * bs
	if shared == 0 {
		t.Fatalf("prompt of %d tokens fills no block; the test needs a longer one", promptLen)
	}
	var cached []int
	computed := 0
	for _, fin := range finals {
		cached = append(cached, fin.CachedTokens)
		computed += fin.PromptTokens - fin.CachedTokens
	}
	// The first choice computes the whole prompt; the two others find
	// its full blocks in the prefix cache.
	wantComputed := promptLen + 2*(promptLen-shared)
	if computed != wantComputed {
		t.Errorf("prompt tokens computed %d (cached per choice %v), want %d: one prefill of %d plus 2 x %d", computed, cached, wantComputed, promptLen, promptLen-shared)
	}
	if got.Usage.PromptTokens != int64(promptLen) || got.Usage.CompletionTokens != 24 || got.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("usage %+v, want prompt %d (counted once), completion 24, cached 0", got.Usage, promptLen)
	}
	if len(got.Choices) != 3 {
		t.Fatalf("%d choices, want 3", len(got.Choices))
	}
	for i, c := range got.Choices {
		if c.Index != int64(i) {
			t.Errorf("choice %d has index %d", i, c.Index)
		}
		one := f.completionParams(longPrompt, 8)
		one.Seed = oai.Int(7 + int64(i))
		one.Temperature = oai.Float(1)
		single, err := f.client.Completions.New(ctx, one)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(single.Choices[0].Text, c.Text); diff != "" {
			t.Errorf("choice %d vs a single request with seed %d (-single +choice):\n%s", i, 7+i, diff)
		}
		if single.Usage.PromptTokensDetails.CachedTokens != int64(shared) {
			t.Errorf("a repeated prompt: cached_tokens %d, want %d", single.Usage.PromptTokensDetails.CachedTokens, shared)
		}
	}

	// Streaming chat with n=2: chunks carry the choice index; each
	// choice's text is what the non-streamed request gives.
	cp := oai.ChatCompletionNewParams{
		Model:               oai.ChatModel(f.model),
		Messages:            []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Tell me about a cat.")},
		MaxCompletionTokens: oai.Int(6),
		N:                   oai.Int(2),
		Seed:                oai.Int(3),
	}
	cp.SetExtraFields(map[string]any{"ignore_eos": true})
	whole, err := f.client.Chat.Completions.New(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	s := f.client.Chat.Completions.NewStreaming(ctx, cp)
	texts := map[int64]string{}
	finish := map[int64]string{}
	for s.Next() {
		for _, ch := range s.Current().Choices {
			texts[ch.Index] += ch.Delta.Content
			if ch.FinishReason != "" {
				finish[ch.Index] = ch.FinishReason
			}
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	wantTexts := map[int64]string{}
	for _, c := range whole.Choices {
		wantTexts[c.Index] = c.Message.Content
	}
	if diff := cmp.Diff(wantTexts, texts); diff != "" || len(texts) != 2 {
		t.Errorf("streamed choices (-whole +streamed):\n%s", diff)
	}
	if diff := cmp.Diff(map[int64]string{0: "length", 1: "length"}, finish); diff != "" {
		t.Errorf("finish reasons (-want +got):\n%s", diff)
	}
}

// TestPromptArray: an array of prompts gives n choices per prompt,
// indexed prompt*n + choice; greedy choices equal single requests.
func TestPromptArray(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	prompts := []string{"Once upon a time", "The cat sat"}
	p := f.completionParams("", 5)
	p.Prompt = oai.CompletionNewParamsPromptUnion{OfArrayOfStrings: prompts}
	p.N = oai.Int(2)
	p.Temperature = oai.Float(0)
	got, err := f.client.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var want, gotTexts []string
	for _, pr := range prompts {
		one := f.completionParams(pr, 5)
		one.Temperature = oai.Float(0)
		r, err := f.client.Completions.New(ctx, one)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r.Choices[0].Text, r.Choices[0].Text)
	}
	for i, c := range got.Choices {
		if c.Index != int64(i) {
			t.Errorf("choice %d has index %d", i, c.Index)
		}
		gotTexts = append(gotTexts, c.Text)
	}
	if diff := cmp.Diff(want, gotTexts); diff != "" {
		t.Errorf("choices (-single requests +array):\n%s", diff)
	}
	if got.Usage.CompletionTokens != 20 {
		t.Errorf("completion tokens %d, want 20", got.Usage.CompletionTokens)
	}
}

// TestChatLogprobs: logprobs with top_logprobs, streamed and not; greedy
// picks the most likely token, so each chosen token is its position's
// first alternative.
func TestChatLogprobs(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	p := oai.ChatCompletionNewParams{
		Model:               oai.ChatModel(f.model),
		Messages:            []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Tell me about a dog.")},
		MaxCompletionTokens: oai.Int(6),
		Temperature:         oai.Float(0),
		Logprobs:            oai.Bool(true),
		TopLogprobs:         oai.Int(3),
	}
	p.SetExtraFields(map[string]any{"ignore_eos": true})
	got, err := f.client.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	content := got.Choices[0].Logprobs.Content
	if len(content) != 6 {
		t.Fatalf("%d logprobs, want 6 (one per token)", len(content))
	}
	var text []byte
	for i, lp := range content {
		if len(lp.TopLogprobs) != 3 || lp.TopLogprobs[0].Token != lp.Token || lp.TopLogprobs[0].Logprob != lp.Logprob || lp.Logprob > 0 {
			t.Errorf("position %d: %+v, want 3 alternatives led by the chosen token", i, lp)
		}
		for _, b := range lp.Bytes {
			text = append(text, byte(b))
		}
	}
	if !strings.HasSuffix(string(text), strings.TrimLeft(got.Choices[0].Message.Content, " ")) {
		t.Errorf("token bytes %q do not spell the content %q", text, got.Choices[0].Message.Content)
	}

	s := f.client.Chat.Completions.NewStreaming(ctx, p)
	var streamed []oai.ChatCompletionTokenLogprob
	for s.Next() {
		for _, ch := range s.Current().Choices {
			streamed = append(streamed, ch.Logprobs.Content...)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	type tl struct {
		Token   string
		Logprob float64
	}
	flat := func(in []oai.ChatCompletionTokenLogprob) (out []tl) {
		for _, x := range in {
			out = append(out, tl{x.Token, x.Logprob})
		}
		return out
	}
	// The second request reuses the first one's prompt blocks from the
	// prefix cache; the logits then differ in the last float bits.
	if diff := cmp.Diff(flat(content), flat(streamed), cmpopts.EquateApprox(0, 1e-4)); diff != "" {
		t.Errorf("streamed logprobs (-whole +streamed):\n%s", diff)
	}
}

// TestCompletionLogprobsAndEcho: logprobs=k gives tokens, token_logprobs,
// top_logprobs (k entries) and text_offset; with echo the prompt leads
// the text and its tokens lead the lists with null logprobs.
func TestCompletionLogprobsAndEcho(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	p := f.completionParams("Once upon a time", 5)
	p.Temperature = oai.Float(0)
	p.Logprobs = oai.Int(2)
	got, err := f.client.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	lp := got.Choices[0].Logprobs
	if len(lp.Tokens) != 5 || len(lp.TokenLogprobs) != 5 || len(lp.TopLogprobs) != 5 || len(lp.TextOffset) != 5 {
		t.Fatalf("logprobs %+v, want 5 of each", lp)
	}
	for i := range lp.Tokens {
		if lp.TokenLogprobs[i] > 0 || len(lp.TopLogprobs[i]) == 0 || len(lp.TopLogprobs[i]) > 2 {
			t.Errorf("position %d: logprob %v, top %v", i, lp.TokenLogprobs[i], lp.TopLogprobs[i])
		}
		if best, ok := lp.TopLogprobs[i][lp.Tokens[i]]; !ok || best != lp.TokenLogprobs[i] {
			t.Errorf("position %d: greedy token %q not among its top logprobs %v", i, lp.Tokens[i], lp.TopLogprobs[i])
		}
		if i > 0 && lp.TextOffset[i] <= lp.TextOffset[i-1] {
			t.Errorf("text offsets %v do not increase", lp.TextOffset)
		}
	}

	// Echo, by hand to see the nulls.
	body := `{"model":"` + f.model + `","prompt":"Once upon a time","max_tokens":3,"temperature":0,"logprobs":1,"echo":true,"ignore_eos":true}`
	req, _ := http.NewRequestWithContext(ctx, "POST", f.srv.URL+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Text     string
			Logprobs struct {
				Tokens        []string
				TokenLogprobs []*float64 `json:"token_logprobs"`
				TextOffset    []int      `json:"text_offset"`
			}
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	c := out.Choices[0]
	if !strings.HasPrefix(c.Text, "Once upon a time") || len(c.Text) <= len("Once upon a time") {
		t.Errorf("echoed text %q, want the prompt then generated text", c.Text)
	}
	n := out.Usage.PromptTokens
	if len(c.Logprobs.Tokens) != n+3 {
		t.Fatalf("%d tokens, want %d prompt + 3", len(c.Logprobs.Tokens), n)
	}
	for i, l := range c.Logprobs.TokenLogprobs {
		if (i < n) != (l == nil) {
			t.Errorf("token %d (%q): logprob %v; want null exactly for the %d prompt tokens", i, c.Logprobs.Tokens[i], l, n)
		}
	}
}

// TestParamErrors: out-of-range parameters get 400 naming the parameter.
func TestParamErrors(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	for _, tc := range []struct {
		name  string
		extra map[string]any
		param string
	}{
		{"n too large", map[string]any{"n": 9}, "n"},
		{"n zero", map[string]any{"n": 0}, "n"},
		{"logprobs too many", map[string]any{"logprobs": 21}, "logprobs"},
		{"presence_penalty", map[string]any{"presence_penalty": 2.5}, "presence_penalty"},
		{"frequency_penalty", map[string]any{"frequency_penalty": -3}, "frequency_penalty"},
		{"repetition_penalty", map[string]any{"repetition_penalty": 11}, "repetition_penalty"},
		{"min_tokens over max_tokens", map[string]any{"min_tokens": 20, "max_tokens": 4}, "min_tokens"},
		{"min_p", map[string]any{"min_p": 1.5}, "min_p"},
		{"top_k", map[string]any{"top_k": -2}, "top_k"},
		{"stop_token_ids", map[string]any{"stop_token_ids": []int{1 << 20}}, "stop_token_ids"},
		{"too many prompts", map[string]any{"prompt": []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}}, "prompt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := f.completionParams("Once", 4)
			p.SetExtraFields(tc.extra)
			_, err := f.client.Completions.New(ctx, p)
			var apiErr *oai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != tc.param || apiErr.Type != "invalid_request_error" {
				t.Errorf("err = %v, want 400 invalid_request_error on %s", err, tc.param)
			}
		})
	}
	t.Run("chat top_logprobs", func(t *testing.T) {
		_, err := f.client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{
			Model: oai.ChatModel(f.model), Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")},
			Logprobs: oai.Bool(true), TopLogprobs: oai.Int(21)})
		var apiErr *oai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "top_logprobs" {
			t.Errorf("err = %v, want 400 on top_logprobs", err)
		}
	})
	// Accepted: the vLLM extensions in range, and user.
	p := f.completionParams("Once", 4)
	p.User = oai.String("alice")
	p.SetExtraFields(map[string]any{"ignore_eos": true, "min_tokens": 4, "repetition_penalty": 1.2, "top_k": 5, "min_p": 0.05,
		"presence_penalty": 0.5, "frequency_penalty": 0.5, "stop_token_ids": []int{2}})
	got, err := f.client.Completions.New(ctx, p)
	if err != nil || got.Usage.CompletionTokens != 4 {
		t.Errorf("in-range extensions: %v, usage %+v", err, got)
	}
}

// TestServedNamesAndRefusals: ModelNames are listed and accepted, others
// get 404; a full queue is 429 with Retry-After; all through the SDK.
func TestServedNamesAndRefusals(t *testing.T) {
	m, err := runtime.Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	h, err := New(Config{Scheduler: refusingScheduler{}, Door: newDoor(t, refusingScheduler{}, m.Tok, chat.Default()), Tokenizer: m.Tok,
		ModelNames: []string{"weft-a", "weft-b"}})
	if err != nil {
		t.Fatal(err)
	}
	h.SetServing(true)
	srv := httptest.NewServer(h)
	defer srv.Close()
	var resp *http.Response
	client := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithMaxRetries(0), option.WithResponseInto(&resp))
	ctx := t.Context()
	list, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if diff := cmp.Diff([]string{"weft-a", "weft-b"}, ids); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
	call := func(model string) *oai.Error {
		_, err := client.Completions.New(ctx, oai.CompletionNewParams{Model: oai.CompletionNewParamsModel(model),
			Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("hi")}})
		var apiErr *oai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("err = %v, want an API error", err)
		}
		return apiErr
	}
	if e := call("weft-b"); e.StatusCode != 429 || e.Code != "rate_limit_exceeded" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("served id on a full queue: %d %q, Retry-After %q; want 429 rate_limit_exceeded with Retry-After", e.StatusCode, e.Code, resp.Header.Get("Retry-After"))
	}
	if e := call("weft-c"); e.StatusCode != 404 || e.Code != "model_not_found" {
		t.Errorf("unknown id: %d %q, want 404 model_not_found", e.StatusCode, e.Code)
	}
}

// TestMetricsAndRequestID: requests are counted by route and code; the
// client's X-Request-Id comes back, and one is made up when it sends none.
func TestMetricsAndRequestID(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	p := f.completionParams("Once", 2)
	if _, err := f.client.Completions.New(ctx, p, option.WithHeader("X-Request-Id", "abc-123")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Completions.New(ctx, p, option.WithAPIKey("wrong")); err == nil {
		t.Fatal("wrong key accepted")
	}
	var resp *http.Response
	if _, err := f.client.Models.List(ctx, option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	if len(resp.Header.Get(RequestIDHeader)) != 16 {
		t.Errorf("made-up request id %q, want 16 hex digits", resp.Header.Get(RequestIDHeader))
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/health", nil)
	req.Header.Set(RequestIDHeader, "abc-123")
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, hr.Body)
	hr.Body.Close()
	if got := hr.Header.Get(RequestIDHeader); got != "abc-123" {
		t.Errorf("request id %q, want the client's abc-123", got)
	}
	for _, tc := range []struct {
		path, code string
		want       float64
	}{{"/v1/completions", "200", 1}, {"/v1/completions", "401", 1}, {"/v1/models", "200", 1}, {"/health", "200", 1}} {
		if got := testutil.ToFloat64(f.h.metrics.requests.WithLabelValues(tc.path, tc.code)); got != tc.want {
			t.Errorf("weft_http_requests_total{path=%q,code=%q} = %v, want %v", tc.path, tc.code, got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(f.h.metrics.duration, "weft_http_request_duration_seconds"); n != 3 {
		t.Errorf("%d duration series, want 3 (one per route)", n)
	}
}
