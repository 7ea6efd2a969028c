package openai

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/runtime/tokenizer"
	"github.com/weft-inference/weft/scheduler"
)

// Limits on request fields beyond what the scheduler checks (the gRPC
// server's limits).
const (
	maxStopStrings   = 16
	maxStopStringLen = 256
	maxStopTokenIDs  = 64
	// completionsDefaultMaxTokens is OpenAI's default max_tokens for
	// /v1/completions; chat defaults to the room left in the context.
	completionsDefaultMaxTokens = 16
	// maxN bounds n, the choices per prompt.
	maxN = 8
)

// Handler serves the OpenAI-compatible API; it is an http.Handler.
type Handler struct {
	cfg     Config
	mux     *http.ServeMux
	root    http.Handler  // mux inside the request-id, log and metrics layer
	tokSem  chan struct{} // one slot per tokenization in progress
	serving atomic.Bool   // health 200 and requests accepted only when set
	created int64         // the model's "created" time in /v1/models
	metrics *metrics
}

var _ http.Handler = (*Handler)(nil)

// New builds the handlers; they refuse requests with 503 until
// SetServing(true).
func New(cfg Config) (*Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, fmt.Errorf("openai: metrics: %w", err)
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), tokSem: make(chan struct{}, cfg.TokenizeConcurrency),
		created: time.Now().Unix(), metrics: m}
	h.mux.HandleFunc("GET /health", h.health)
	h.mux.Handle("GET /v1/models", h.authed(h.models))
	h.mux.Handle("POST /v1/completions", h.authed(h.completions))
	h.mux.Handle("POST /v1/chat/completions", h.authed(h.chatCompletions))
	h.root = h.observe(h.mux)
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.root.ServeHTTP(w, r) }

// SetServing turns health (and admission) on or off.
func (h *Handler) SetServing(ok bool) { h.serving.Store(ok) }

// BeginDrain starts a drain: health answers 503, new requests get 503 and
// the scheduler stops admitting; in-flight requests go on.
func (h *Handler) BeginDrain() {
	h.SetServing(false)
	h.cfg.Scheduler.Drain()
}

func (h *Handler) health(w http.ResponseWriter, _ *http.Request) {
	if !h.serving.Load() {
		writeError(w, errNotServing)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte("{}\n"))
}

// authed requires the bearer token (scheme case-insensitive, token
// compared in constant time) when one is configured, and refuses with 503 while not serving.
func (h *Handler) authed(f http.HandlerFunc) http.Handler {
	want := []byte(h.cfg.AuthToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(want) > 0 {
			scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
			if !strings.EqualFold(scheme, "bearer") || subtle.ConstantTimeCompare([]byte(tok), want) != 1 {
				writeError(w, errUnauthenticated)
				return
			}
		}
		if !h.serving.Load() {
			writeError(w, errNotServing)
			return
		}
		f(w, r)
	})
}

func (h *Handler) models(w http.ResponseWriter, _ *http.Request) {
	l := modelList{Object: "list", Data: []model{}}
	for _, id := range h.cfg.ModelNames {
		l.Data = append(l.Data, model{ID: id, Object: "model", Created: h.created, OwnedBy: "weft"})
	}
	writeJSON(w, l)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// decode reads the JSON body into v, bounded by MaxBodyBytes.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes)
	if err := json.NewDecoder(body).Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return &requestError{status: http.StatusBadRequest, code: "invalid_json", msg: "request body: " + err.Error()}
	}
	return nil
}

// checkModel refuses a model id the server does not serve.
func (h *Handler) checkModel(id string) error {
	if !slices.Contains(h.cfg.ModelNames, id) {
		return &requestError{status: http.StatusNotFound, code: "model_not_found", param: "model",
			msg: fmt.Sprintf("model %q does not exist; this server serves %q", id, h.cfg.ModelNames)}
	}
	return nil
}

// checkPromptBytes refuses n bytes of prompt text over MaxPromptBytes,
// before any tokenization.
func (h *Handler) checkPromptBytes(param string, n int) error {
	if n <= h.cfg.MaxPromptBytes {
		return nil
	}
	return &requestError{status: http.StatusBadRequest, code: "context_length_exceeded", param: param,
		msg: fmt.Sprintf("%s: %d bytes of text, at most %d", param, n, h.cfg.MaxPromptBytes)}
}

// tokenize runs f holding one of the TokenizeConcurrency slots; it gives
// up when ctx ends.
func (h *Handler) tokenize(ctx context.Context, f func()) error {
	select {
	case h.tokSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-h.tokSem }()
	f()
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// logprobSpec is what a request asks for in logprobs: on, and how many
// alternatives per position.
type logprobSpec struct {
	on  bool
	top int
}

// inRange checks an optional float parameter against [lo, hi] and
// returns it (def when absent).
func inRange(param string, v *float64, def, lo, hi float64) (float32, error) {
	if v == nil {
		return float32(def), nil
	}
	if !finite(*v) || *v < lo || *v > hi {
		return 0, badParam(param, "%v must be in [%v, %v]", *v, lo, hi)
	}
	return float32(*v), nil
}

// buildRequest validates p and makes the scheduler request for prompt.
// maxTokens is the request's max_tokens (nil: defaultMax, 0: the room
// left). Sampling.Seed is the request's seed (random when absent); the
// caller offsets it per choice.
func (h *Handler) buildRequest(id string, prompt []int32, p commonParams, maxTokens *int, defaultMax int, lp logprobSpec) (scheduler.Request, error) {
	ctxLen, vocab := h.cfg.ContextLen, h.cfg.VocabSize
	r := scheduler.Request{ID: id, Prompt: prompt, QueueTimeout: h.cfg.QueueTimeout}
	if len(prompt) == 0 {
		return r, badParam("prompt", "empty prompt")
	}
	for _, t := range prompt {
		if t < 0 || int(t) >= vocab {
			return r, badParam("prompt", "token id %d outside the vocabulary [0, %d)", t, vocab)
		}
	}
	if len(prompt) >= ctxLen {
		return r, &requestError{status: http.StatusBadRequest, code: "context_length_exceeded", param: "prompt",
			msg: fmt.Sprintf("prompt has %d tokens; the context holds %d (prompt plus at least one generated token)", len(prompt), ctxLen)}
	}
	var sp sample.Params
	var err error
	// OpenAI's defaults: temperature 1, top_p 1; the rest off.
	if sp.Temperature, err = inRange("temperature", p.Temperature, 1, 0, 2); err != nil {
		return r, err
	}
	if sp.TopP, err = inRange("top_p", p.TopP, 1, 0, 1); err != nil {
		return r, err
	}
	if p.TopP != nil && *p.TopP == 0 {
		return r, badParam("top_p", "0 must be in (0, 1]")
	}
	if sp.MinP, err = inRange("min_p", p.MinP, 0, 0, 1); err != nil {
		return r, err
	}
	if sp.PresencePenalty, err = inRange("presence_penalty", p.PresencePenalty, 0, -2, 2); err != nil {
		return r, err
	}
	if sp.FrequencyPenalty, err = inRange("frequency_penalty", p.FrequencyPenalty, 0, -2, 2); err != nil {
		return r, err
	}
	// repetition_penalty: 1 (or 0) is off, as in vLLM and llama.cpp.
	if sp.RepetitionPenalty, err = inRange("repetition_penalty", p.RepetitionPenalty, 1, 0, 10); err != nil {
		return r, err
	}
	if p.TopK != nil && *p.TopK != -1 { // -1: off, as in vLLM
		if *p.TopK < 0 {
			return r, badParam("top_k", "%d must be -1 (off), 0 (off) or > 0", *p.TopK)
		}
		sp.TopK = *p.TopK
	}
	sp.Seed = rngSeed()
	if p.Seed != nil {
		sp.Seed = uint64(*p.Seed)
	}
	sp.Logprobs, sp.TopLogprobs = lp.on, lp.top
	r.Sampling = sp

	room := ctxLen - len(prompt)
	switch {
	case maxTokens == nil:
		r.MaxTokens = min(defaultMax, room)
	case *maxTokens < 1 || *maxTokens > room:
		return r, &requestError{status: http.StatusBadRequest, code: "context_length_exceeded", param: "max_tokens",
			msg: fmt.Sprintf("max_tokens: %d must be in [1, %d] (the context holds %d tokens, the prompt has %d)", *maxTokens, room, ctxLen, len(prompt))}
	default:
		r.MaxTokens = *maxTokens
	}
	if p.MinTokens != nil {
		if *p.MinTokens < 0 || *p.MinTokens > r.MaxTokens {
			return r, badParam("min_tokens", "%d must be in [0, max_tokens=%d]", *p.MinTokens, r.MaxTokens)
		}
		r.MinTokens = *p.MinTokens
	}
	stops, err := stopStrings(p.Stop)
	if err != nil {
		return r, err
	}
	if len(stops) > maxStopStrings {
		return r, badParam("stop", "%d stop strings, at most %d", len(stops), maxStopStrings)
	}
	for _, s := range stops {
		if !utf8.ValidString(s) || s == "" || len(s) > maxStopStringLen {
			return r, badParam("stop", "stop strings must be valid UTF-8 of 1 to %d bytes", maxStopStringLen)
		}
	}
	r.StopStrings = stops
	if len(p.StopTokenIDs) > maxStopTokenIDs {
		return r, badParam("stop_token_ids", "%d ids, at most %d", len(p.StopTokenIDs), maxStopTokenIDs)
	}
	for _, t := range p.StopTokenIDs {
		if t < 0 || int(t) >= vocab {
			return r, badParam("stop_token_ids", "token id %d outside the vocabulary [0, %d)", t, vocab)
		}
	}
	r.StopTokenIDs = p.StopTokenIDs
	r.IgnoreEOS = p.IgnoreEOS
	return r, nil
}

// rngSeed is the seed of a sequence whose request gave none.
func rngSeed() uint64 { return mrand.Uint64() }

// choicesOf checks n (1 to maxN; absent: 1).
func choicesOf(n *int) (int, error) {
	if n == nil {
		return 1, nil
	}
	if *n < 1 || *n > maxN {
		return 0, badParam("n", "%d must be in [1, %d]", *n, maxN)
	}
	return *n, nil
}

// newID makes a response id with prefix ("cmpl-", "chatcmpl-").
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func (h *Handler) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if err := h.decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	j, err := h.completionJob(r.Context(), &req)
	if err != nil {
		writeError(w, err)
		return
	}
	h.logUser(r, req.User)
	h.run(w, r, j)
}

// completionJob validates and tokenizes a completions request.
func (h *Handler) completionJob(ctx context.Context, req *completionRequest) (*job, error) {
	if err := h.checkModel(req.Model); err != nil {
		return nil, err
	}
	n, err := choicesOf(req.N)
	if err != nil {
		return nil, err
	}
	var lp logprobSpec
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > sample.MaxTopLogprobs {
			return nil, badParam("logprobs", "%d must be in [0, %d]", *req.Logprobs, sample.MaxTopLogprobs)
		}
		lp = logprobSpec{on: true, top: *req.Logprobs}
	}
	prompts, err := promptsOf(req.Prompt)
	if err != nil {
		return nil, err
	}
	textBytes := 0
	for _, p := range prompts {
		if p.text != "" && !utf8.ValidString(p.text) {
			return nil, badParam("prompt", "not valid UTF-8")
		}
		textBytes += len(p.text)
	}
	if err := h.checkPromptBytes("prompt", textBytes); err != nil {
		return nil, err
	}
	j := &job{id: newID("cmpl-"), kind: kindCompletion, model: req.Model, n: n, params: req.commonParams, logprobs: lp}
	for _, p := range prompts {
		ids := p.ids
		if p.text != "" {
			// User text never becomes control tokens (parseSpecial false).
			if err := h.tokenize(ctx, func() { ids = h.cfg.Tokenizer.Encode(p.text, true, false) }); err != nil {
				return nil, err
			}
		}
		sr, err := h.buildRequest(j.id, ids, req.commonParams, req.MaxTokens, completionsDefaultMaxTokens, lp)
		if err != nil {
			return nil, err
		}
		jp := jobPrompt{req: sr}
		if req.Echo {
			jp.echo = p.text
			if p.text == "" {
				jp.echo = h.cfg.Tokenizer.Decode(ids)
			}
			if lp.on {
				jp.echoIDs = ids
			}
		}
		j.prompts = append(j.prompts, jp)
	}
	return j, nil
}

func (h *Handler) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := h.decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	j, err := h.chatJob(r.Context(), &req)
	if err != nil {
		writeError(w, err)
		return
	}
	h.logUser(r, req.User)
	h.run(w, r, j)
}

// chatJob validates, renders and tokenizes a chat request.
func (h *Handler) chatJob(ctx context.Context, req *chatRequest) (*job, error) {
	if err := h.checkModel(req.Model); err != nil {
		return nil, err
	}
	if h.cfg.Chat == nil {
		return nil, errNoChatTemplate
	}
	n, err := choicesOf(req.N)
	if err != nil {
		return nil, err
	}
	lp := logprobSpec{on: req.Logprobs}
	if req.TopLogprobs != nil {
		switch {
		case *req.TopLogprobs < 0 || *req.TopLogprobs > sample.MaxTopLogprobs:
			return nil, badParam("top_logprobs", "%d must be in [0, %d]", *req.TopLogprobs, sample.MaxTopLogprobs)
		case !req.Logprobs && *req.TopLogprobs > 0:
			return nil, badParam("top_logprobs", "needs logprobs: true")
		}
		lp.top = *req.TopLogprobs
	}
	prompt, err := h.chatPrompt(ctx, req.Messages)
	if err != nil {
		return nil, err
	}
	maxTokens := req.MaxCompletionTokens
	if maxTokens == nil {
		maxTokens = req.MaxTokens
	}
	j := &job{id: newID("chatcmpl-"), kind: kindChat, model: req.Model, n: n, params: req.commonParams, logprobs: lp}
	sr, err := h.buildRequest(j.id, prompt, req.commonParams, maxTokens, h.cfg.ContextLen, lp)
	if err != nil {
		return nil, err
	}
	j.prompts = []jobPrompt{{req: sr}}
	return j, nil
}

// logUser logs the request's user field (it decides nothing).
func (h *Handler) logUser(r *http.Request, user string) {
	if user != "" {
		h.cfg.Logger.InfoContext(r.Context(), "openai request", "user", user)
	}
}

// chatPrompt checks, renders and tokenizes msgs. Message contents are
// tokenized as plain text (they never produce control tokens); only the
// template's own text does. The contents, then the rendered prompt, are
// bounded in bytes before tokenizing.
func (h *Handler) chatPrompt(ctx context.Context, in []chatMessage) ([]int32, error) {
	if len(in) == 0 {
		return nil, badParam("messages", "at least one message is required")
	}
	msgs := make([]chat.Message, len(in))
	n := 0
	for i, m := range in {
		switch m.Role {
		case "system", "user", "assistant":
		case "developer":
			m.Role = "system"
		default:
			return nil, badParam(fmt.Sprintf("messages[%d].role", i), "%q: want system, user or assistant", m.Role)
		}
		c, err := contentOf(i, m.Content)
		if err != nil {
			return nil, err
		}
		if !utf8.ValidString(c) {
			return nil, badParam(fmt.Sprintf("messages[%d].content", i), "not valid UTF-8")
		}
		n += len(c)
		msgs[i] = chat.Message{Role: m.Role, Content: c}
	}
	if err := h.checkPromptBytes("messages", n); err != nil {
		return nil, err
	}
	parts, err := h.cfg.Chat.RenderSegments(msgs, true)
	if err != nil {
		return nil, badParam("messages", "the chat template: %v", err)
	}
	segs := make([]tokenizer.Segment, len(parts))
	rendered := 0
	for i, p := range parts {
		segs[i] = tokenizer.Segment{Text: p.Text, ParseSpecial: !p.Content}
		rendered += len(p.Text)
	}
	if err := h.checkPromptBytes("messages", rendered); err != nil {
		return nil, err
	}
	var prompt []int32
	if err := h.tokenize(ctx, func() { prompt = h.cfg.Tokenizer.EncodeSegments(segs, false) }); err != nil {
		return nil, err
	}
	if bt, ok := h.cfg.Tokenizer.(bosTokenizer); ok && bt.AddBOS() && (len(prompt) == 0 || prompt[0] != bt.BOS()) {
		prompt = append([]int32{bt.BOS()}, prompt...)
	}
	return prompt, nil
}

// LoadingHandler answers while the model loads: /health 503, every other
// path 503 (401 first when token is set and the request lacks it), in
// OpenAI's error shape.
func LoadingHandler(token string) http.Handler {
	h := &Handler{cfg: Config{AuthToken: token}}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", h.health)
	mux.Handle("/", h.authed(nil)) // never called: h is not serving
	return mux
}
