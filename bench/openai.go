package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// OpenAIConfig says where an OpenAI-compatible server is.
type OpenAIConfig struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:8080 (the API
	// is under URL/v1).
	URL string
	// Model is the model id sent; "": the first id of GET /v1/models.
	Model string
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token string
	// HTTP sends the requests; nil: a client with default settings.
	HTTP *http.Client
}

// RunOpenAI benchmarks an OpenAI-compatible server (weft's HTTP API,
// llama.cpp's llama-server, vLLM...) with cfg's load and lengths: each
// request is a streamed POST /v1/completions of a text prompt (PromptLen
// words of PromptWords) with max_tokens, temperature 0, ignore_eos (an
// extension of vLLM and llama-server) and stream_options.include_usage.
// Token counts come from the final usage, not from the events (servers
// merge and split tokens across events): the prompt and output tokens of a
// Record are the server's, and its Chunks are the events with text, the
// usage's output tokens spread over them (for the tokens-over-time plot).
// TTFT is the first event with text; ITL the gaps between such events.
// Drafted and accepted tokens come from llama-server's "timings" extension
// (draft_n, draft_n_accepted) when an event carries it, else from the
// usage's completion_tokens_details (weft: accepted_prediction_tokens and
// rejected_prediction_tokens).
func RunOpenAI(ctx context.Context, oc OpenAIConfig, cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	if cfg.ResponseFormat != nil {
		return Result{}, errors.New("bench: a response format is sent over gRPC only")
	}
	if oc.HTTP == nil {
		oc.HTTP = &http.Client{}
	}
	oc.URL = strings.TrimSuffix(oc.URL, "/")
	if oc.Model == "" {
		id, err := oc.firstModel(ctx)
		if err != nil {
			return Result{}, err
		}
		oc.Model = id
	}
	w := &Workload{Seed: cfg.Seed, PromptLen: cfg.PromptLen, OutputLen: cfg.OutputLen, Words: PromptWords}
	res, err := runLoad(ctx, &cfg, w, func(ctx context.Context, s Spec, t0 time.Time) Record {
		return oc.send(ctx, &cfg, s, t0)
	}, func(ctx context.Context, s Spec) (Continuation, error) {
		return oc.continuation(ctx, &cfg, s)
	})
	res.Model = oc.Model
	return res, err
}

func (oc *OpenAIConfig) do(req *http.Request) (*http.Response, error) {
	if oc.Token != "" {
		req.Header.Set("Authorization", "Bearer "+oc.Token)
	}
	resp, err := oc.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, bytes.TrimSpace(b))
	}
	return resp, nil
}

// firstModel is the first id GET /v1/models lists.
func (oc *OpenAIConfig) firstModel(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", oc.URL+"/v1/models", nil)
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	resp, err := oc.do(req)
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	defer resp.Body.Close()
	var l struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return "", fmt.Errorf("bench: /v1/models: %w", err)
	}
	if len(l.Data) == 0 || l.Data[0].ID == "" {
		return "", errors.New("bench: /v1/models lists no model")
	}
	return l.Data[0].ID, nil
}

// completionEvent is the part of a streamed completion chunk read.
type completionEvent struct {
	Choices []struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		// Details carries weft's drafted tokens in OpenAI's Predicted
		// Outputs fields: accepted and rejected.
		Details *struct {
			Accepted int `json:"accepted_prediction_tokens"`
			Rejected int `json:"rejected_prediction_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	// Timings is llama-server's extension: with speculative decoding it
	// counts the request's drafted and accepted tokens.
	Timings *struct {
		DraftN         int `json:"draft_n"`
		DraftNAccepted int `json:"draft_n_accepted"`
	} `json:"timings"`
}

// send streams one completion and records it. An HTTP error, an error
// event, a stream without usage or [DONE], a finish reason other than
// stop or length, or (with ignore_eos) another output length fails it.
func (oc *OpenAIConfig) send(ctx context.Context, cfg *Config, s Spec, t0 time.Time) Record {
	r := Record{Index: s.Index, OutputLen: s.OutputLen, Target: oc.URL}
	body, _ := json.Marshal(map[string]any{
		"model": oc.Model, "prompt": s.Text, "max_tokens": s.OutputLen, "temperature": 0,
		"ignore_eos": cfg.IgnoreEOS, "stream": true, "stream_options": map[string]any{"include_usage": true},
	})
	sent := time.Now()
	r.Sent = sent.Sub(t0)
	fail := func(err error) Record {
		r.End = time.Since(sent)
		r.Err = fmt.Errorf("request %d: %w", s.Index, err)
		return r
	}
	req, err := http.NewRequestWithContext(ctx, "POST", oc.URL+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return fail(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", fmt.Sprintf("bench-%d", s.Index))
	// An Idempotency-Key makes net/http resend the request on a fresh
	// connection when the server closed the pooled one before reading it
	// (llama-server drops idle keep-alive connections); without it a POST
	// that met a closing connection fails the run. The transport retries
	// only when the pooled connection was closed before any response came,
	// so no completion is counted twice.
	req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%d", s.Index))
	resp, err := oc.do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	done, finish, gotUsage := false, "", false
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // blank separators, comments, other SSE fields
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			done = true
			r.End = time.Since(sent)
			break
		}
		var ev completionEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return fail(fmt.Errorf("event %q: %w", data, err))
		}
		if ev.Error != nil {
			return fail(fmt.Errorf("server error: %s", ev.Error.Message))
		}
		text := false
		for _, c := range ev.Choices {
			text = text || c.Text != ""
			if c.FinishReason != nil && *c.FinishReason != "" {
				finish = *c.FinishReason
			}
		}
		if text {
			r.Chunks = append(r.Chunks, ChunkTime{At: time.Since(sent)})
		}
		if ev.Timings != nil && ev.Timings.DraftN > 0 {
			r.DraftTokens, r.AcceptedDraftTokens = ev.Timings.DraftN, ev.Timings.DraftNAccepted
		}
		if ev.Usage != nil {
			gotUsage = true
			r.PromptTokens, r.OutputTokens = ev.Usage.PromptTokens, ev.Usage.CompletionTokens
			if d := ev.Usage.Details; d != nil && d.Accepted+d.Rejected > 0 && r.DraftTokens == 0 {
				r.DraftTokens, r.AcceptedDraftTokens = d.Accepted+d.Rejected, d.Accepted
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fail(err)
	}
	r.Finish = finish
	switch {
	case !done:
		return fail(errors.New("stream ended without [DONE]"))
	case !gotUsage:
		return fail(errors.New("stream without usage (the server ignored stream_options.include_usage)"))
	case finish != "stop" && finish != "length":
		return fail(fmt.Errorf("finish_reason %q", finish))
	case cfg.IgnoreEOS && r.OutputTokens != s.OutputLen:
		return fail(fmt.Errorf("got %d tokens with ignore_eos, want %d (finish %s)", r.OutputTokens, s.OutputLen, finish))
	case r.OutputTokens > 0 && len(r.Chunks) == 0:
		return fail(errors.New("usage counts output tokens but no event carried text"))
	}
	// Spread the usage's tokens over the events, earliest first.
	for i := range r.Chunks {
		r.Chunks[i].Tokens = r.OutputTokens / len(r.Chunks)
		if i < r.OutputTokens%len(r.Chunks) {
			r.Chunks[i].Tokens++
		}
	}
	return r
}

// continuation asks for s's greedy completion (not streamed, s.OutputLen
// tokens, ignore_eos as cfg says) and returns its text.
func (oc *OpenAIConfig) continuation(ctx context.Context, cfg *Config, s Spec) (Continuation, error) {
	body, _ := json.Marshal(map[string]any{
		"model": oc.Model, "prompt": s.Text, "max_tokens": s.OutputLen, "temperature": 0, "ignore_eos": cfg.IgnoreEOS,
	})
	req, err := http.NewRequestWithContext(ctx, "POST", oc.URL+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return Continuation{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := oc.do(req)
	if err != nil {
		return Continuation{}, err
	}
	defer resp.Body.Close()
	var c struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		return Continuation{}, fmt.Errorf("/v1/completions: %w", err)
	}
	if len(c.Choices) == 0 || c.Choices[0].Text == "" {
		return Continuation{}, errors.New("/v1/completions: empty completion")
	}
	return Continuation{Text: c.Choices[0].Text}, nil
}
