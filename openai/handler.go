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
)

// Handler serves the OpenAI-compatible API; it is an http.Handler.
type Handler struct {
	cfg     Config
	mux     *http.ServeMux
	tokSem  chan struct{} // one slot per tokenization in progress
	serving atomic.Bool   // health 200 and requests accepted only when set
	created int64         // the model's "created" time in /v1/models
	formats formatCache   // compiled structured-output formats (format.go)
}

var _ http.Handler = (*Handler)(nil)

// New builds the handlers; they refuse requests with 503 until
// SetServing(true).
func New(cfg Config) (*Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), tokSem: make(chan struct{}, cfg.TokenizeConcurrency), created: time.Now().Unix()}
	h.mux.HandleFunc("GET /health", h.health)
	h.mux.Handle("GET /v1/models", h.authed(h.models))
	h.mux.Handle("POST /v1/completions", h.authed(h.completions))
	h.mux.Handle("POST /v1/chat/completions", h.authed(h.chatCompletions))
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

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
	writeJSON(w, modelList{Object: "list", Data: []model{{ID: h.cfg.ModelName, Object: "model", Created: h.created, OwnedBy: "weft"}}})
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

// checkModel refuses a model id other than the one served.
func (h *Handler) checkModel(id string) error {
	if id != h.cfg.ModelName {
		return &requestError{status: http.StatusNotFound, code: "model_not_found", param: "model",
			msg: fmt.Sprintf("model %q does not exist; this server serves %q", id, h.cfg.ModelName)}
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

// buildRequest validates p and makes the scheduler request for prompt.
// maxTokens is the request's max_tokens (nil: defaultMax, 0: the room left).
func (h *Handler) buildRequest(id string, prompt []int32, p commonParams, maxTokens *int, defaultMax int) (scheduler.Request, error) {
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
	if p.N != nil && *p.N != 1 {
		return r, badParam("n", "%d: only n=1 is supported", *p.N)
	}
	temp, topP, minP := 1.0, 1.0, 0.0 // OpenAI's defaults
	if p.Temperature != nil {
		temp = *p.Temperature
	}
	if p.TopP != nil {
		topP = *p.TopP
	}
	if p.MinP != nil {
		minP = *p.MinP
	}
	topK := 0
	if p.TopK != nil && *p.TopK != -1 { // -1: off, as in vLLM
		topK = *p.TopK
	}
	switch {
	case !finite(temp) || temp < 0 || temp > 2:
		return r, badParam("temperature", "%v must be in [0, 2]", temp)
	case !finite(topP) || topP <= 0 || topP > 1:
		return r, badParam("top_p", "%v must be in (0, 1]", topP)
	case !finite(minP) || minP < 0 || minP > 1:
		return r, badParam("min_p", "%v must be in [0, 1]", minP)
	case topK < 0:
		return r, badParam("top_k", "%d must be -1 (off), 0 (off) or > 0", topK)
	}
	seed := mrand.Uint64()
	if p.Seed != nil {
		seed = uint64(*p.Seed)
	}
	r.Sampling = sample.Params{Temperature: float32(temp), TopK: topK, TopP: float32(topP), MinP: float32(minP), Seed: seed}
	c, err := h.constraint(p.formatParams)
	if err != nil {
		return r, err
	}
	r.Sampling.Constraint = c

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
	if err := h.checkModel(req.Model); err != nil {
		writeError(w, err)
		return
	}
	text, ids, err := promptOf(req.Prompt)
	if err != nil {
		writeError(w, err)
		return
	}
	if text != "" {
		if !utf8.ValidString(text) {
			writeError(w, badParam("prompt", "not valid UTF-8"))
			return
		}
		if err := h.checkPromptBytes("prompt", len(text)); err != nil {
			writeError(w, err)
			return
		}
		// User text never becomes control tokens (parseSpecial false).
		if err := h.tokenize(r.Context(), func() { ids = h.cfg.Tokenizer.Encode(text, true, false) }); err != nil {
			writeError(w, err)
			return
		}
	}
	id := newID("cmpl-")
	sr, err := h.buildRequest(id, ids, req.commonParams, req.MaxTokens, completionsDefaultMaxTokens)
	if err != nil {
		writeError(w, err)
		return
	}
	h.run(w, r, sr, req.commonParams, kindCompletion)
}

func (h *Handler) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := h.decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := h.checkModel(req.Model); err != nil {
		writeError(w, err)
		return
	}
	if h.cfg.Chat == nil {
		writeError(w, errNoChatTemplate)
		return
	}
	prompt, err := h.chatPrompt(r.Context(), req.Messages)
	if err != nil {
		writeError(w, err)
		return
	}
	maxTokens := req.MaxCompletionTokens
	if maxTokens == nil {
		maxTokens = req.MaxTokens
	}
	id := newID("chatcmpl-")
	sr, err := h.buildRequest(id, prompt, req.commonParams, maxTokens, h.cfg.ContextLen)
	if err != nil {
		writeError(w, err)
		return
	}
	h.run(w, r, sr, req.commonParams, kindChat)
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
