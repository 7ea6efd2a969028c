package openai

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/scheduler"
)

// The OpenAI API's own wire rules (every bound on a request's values is
// the scheduler's or the sampler's, checked by Submit).
const (
	// completionsDefaultMaxTokens is OpenAI's documented default
	// max_tokens for /v1/completions; chat defaults to the Door's (the
	// room left in the context, at most the scheduler's default).
	completionsDefaultMaxTokens = 16
	// maxN bounds n, the choices per prompt (a door's own parameter: the
	// scheduler sees n sequences).
	maxN = 8
)

// Handler serves the OpenAI-compatible API; it is an http.Handler.
type Handler struct {
	cfg     Config
	mux     *http.ServeMux
	root    http.Handler    // mux inside the request-id, log and metrics layer
	door    *frontdoor.Door // the request pipeline, shared with every door
	log     *slog.Logger    // the Door's: lines carry the request id
	serving atomic.Bool     // health 200 and requests accepted only when set
	created int64           // the model's "created" time in /v1/models
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
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), door: cfg.Door, log: cfg.Door.Logger(), created: time.Now().Unix(), metrics: m}
	h.mux.HandleFunc("GET /health", h.health)
	h.mux.Handle("GET /v1/models", h.authed(h.models))
	h.mux.Handle("POST /v1/completions", h.authed(h.completions))
	h.mux.Handle("POST /v1/chat/completions", h.authed(h.chatCompletions))
	h.mux.Handle("POST /v1/embeddings", h.authed(h.embeddings))
	h.mux.Handle("POST /tokenize", h.authed(h.tokenize))
	h.mux.Handle("POST /detokenize", h.authed(h.detokenize))
	h.mux.Handle("POST /v1/responses", h.authed(h.responses))
	h.root = h.observe(h.mux)
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.root.ServeHTTP(w, r) }

// Mount serves next at pattern (a ServeMux pattern, e.g. "POST
// /v1/messages") on this handler's mux, inside its request-id, log and
// HTTP-metrics layer: another door (package anthropic) shares the
// listener, its TLS and its drain this way. next does its own auth and
// error shape. Call it before serving.
func (h *Handler) Mount(pattern string, next http.Handler) { h.mux.Handle(pattern, next) }

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

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// logprobSpec is what a request asks for in logprobs: on, and how many
// alternatives per position.
type logprobSpec struct {
	on  bool
	top int
}

// f32 is an optional float parameter as the sampler takes it (def when
// absent), NaN and infinities refused here (JSON has none, but a huge
// number overflows float32). Its range is sample.Params.Validate's.
func f32(param string, v *float64, def float32) (float32, error) {
	if v == nil {
		return def, nil
	}
	if !finite(*v) || math.Abs(*v) > math.MaxFloat32 {
		return 0, badParam(param, "%v is not a finite number", *v)
	}
	return float32(*v), nil
}

// buildRequests makes the n scheduler requests of prompt's n choices
// from p (frontdoor.Door.Requests: same but for their seeds). Only the
// wire's value shapes are checked here (a number that is no float32);
// every range is the scheduler's or the sampler's, as on gRPC (Submit
// refuses with a *scheduler.LimitError or a *sample.ParamError naming the
// field, which apiErrorOf maps). maxTokens is the request's max_tokens
// (nil: defaultMax, itself nil for the Door's default).
func (h *Handler) buildRequests(id string, prompt []int32, p commonParams, maxTokens, defaultMax *int, lp logprobSpec, n int) ([]scheduler.Request, error) {
	var sp sample.Params
	var err error
	// OpenAI's defaults: temperature 1, top_p 1; the rest off.
	if sp.Temperature, err = f32("temperature", p.Temperature, 1); err != nil {
		return nil, err
	}
	if sp.TopP, err = f32("top_p", p.TopP, 1); err != nil {
		return nil, err
	}
	if sp.MinP, err = f32("min_p", p.MinP, 0); err != nil {
		return nil, err
	}
	if sp.PresencePenalty, err = f32("presence_penalty", p.PresencePenalty, 0); err != nil {
		return nil, err
	}
	if sp.FrequencyPenalty, err = f32("frequency_penalty", p.FrequencyPenalty, 0); err != nil {
		return nil, err
	}
	if sp.RepetitionPenalty, err = f32("repetition_penalty", p.RepetitionPenalty, 1); err != nil {
		return nil, err
	}
	if p.TopK != nil && *p.TopK != -1 { // -1: off, as in vLLM
		sp.TopK = *p.TopK
	}
	sp.Logprobs, sp.TopLogprobs = lp.on, lp.top
	o := frontdoor.Options{Sampling: sp, SeedSet: p.Seed != nil, MaxTokens: defaultMax,
		StopTokenIDs: p.StopTokenIDs, IgnoreEOS: p.IgnoreEOS}
	if p.Seed != nil {
		o.Sampling.Seed = uint64(*p.Seed)
	}
	if maxTokens != nil {
		o.MaxTokens = maxTokens
	}
	if p.MinTokens != nil {
		o.MinTokens = *p.MinTokens
	}
	if o.StopStrings, err = stopStrings(p.Stop); err != nil {
		return nil, err
	}
	if o.Sampling.Constraint, err = h.constraint(p.formatParams); err != nil {
		return nil, err
	}
	return h.door.Requests(id, prompt, o, n), nil
}

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
	if req.Logprobs != nil { // its range is the sampler's top_logprobs'
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
	if err := h.door.CheckPromptBytes("prompt", textBytes); err != nil {
		return nil, err
	}
	j := &job{id: newID("cmpl-"), kind: kindCompletion, model: req.Model, n: n, params: req.commonParams, logprobs: lp}
	for _, p := range prompts {
		ids := p.ids
		if p.text != "" {
			// User text never becomes control tokens (parseSpecial false).
			var err error
			if ids, err = h.door.Encode(ctx, p.text, true, false); err != nil {
				return nil, err
			}
		}
		def := completionsDefaultMaxTokens
		reqs, err := h.buildRequests(j.id, ids, req.commonParams, req.MaxTokens, &def, lp, n)
		if err != nil {
			return nil, err
		}
		jp := jobPrompt{reqs: reqs}
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
	if !h.door.HasChat() {
		return nil, errNoChatTemplate
	}
	n, err := choicesOf(req.N)
	if err != nil {
		return nil, err
	}
	lp := logprobSpec{on: req.Logprobs}
	if req.TopLogprobs != nil {
		// Its range is the sampler's (Submit checks it).
		if !req.Logprobs && *req.TopLogprobs > 0 {
			return nil, badParam("top_logprobs", "needs logprobs: true")
		}
		lp.top = *req.TopLogprobs
	}
	tools, err := h.toolsOf(req)
	if err != nil {
		return nil, err
	}
	v, err := templateVars(req)
	if err != nil {
		return nil, err
	}
	msgs, err := chatMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	if err := frontdoor.CheckToolMessages(msgs, 0); err != nil {
		return nil, err
	}
	maxTokens := req.MaxCompletionTokens
	if maxTokens == nil {
		maxTokens = req.MaxTokens
	}
	j := &job{id: newID("chatcmpl-"), kind: kindChat, model: req.Model, n: n, params: req.commonParams, logprobs: lp}
	if err := h.chatRequests(ctx, j, msgs, tools, v, maxTokens, nil); err != nil {
		return nil, err
	}
	return j, nil
}

// chatRequests renders a conversation whose tool calls and results are
// checked (frontdoor.CheckToolMessages) with its tools and template
// variables (frontdoor.ChatPromptTools: contents tokenized as plain text,
// never control tokens; bytes bounded before tokenizing; a prompt over
// the context refused) and makes j's one prompt: its j.n requests,
// sampled as j.params say, constrained by format (nil: j.params' own
// format, if any) or, under tool choice required or a named tool, by the
// Door's call grammar. Every chat-shaped endpoint (chat completions,
// responses) ends here.
func (h *Handler) chatRequests(ctx context.Context, j *job, msgs []chat.Message, tools *frontdoor.ToolSpec, v chat.Vars, maxTokens *int, format sample.Constraint) error {
	_, prompt, err := h.door.ChatPromptTools(ctx, msgs, 0, frontdoor.Reject, v, tools)
	if err != nil {
		return err
	}
	if tools.Parse() {
		j.tools = tools
	}
	reqs, err := h.buildRequests(j.id, prompt, j.params, maxTokens, nil, j.logprobs, j.n)
	if err != nil {
		return err
	}
	if format != nil {
		for i := range reqs {
			reqs[i].Sampling.Constraint = format
		}
	}
	tc, err := h.door.ToolConstraint(tools)
	if err != nil {
		return err
	}
	if tc != nil {
		if reqs[0].Sampling.Constraint != nil {
			return badParam("tool_choice", "%s cannot be combined with a response format", tools.Choice)
		}
		for i := range reqs {
			reqs[i].Sampling.Constraint = tc
		}
	}
	j.prompts = []jobPrompt{{reqs: reqs}}
	return nil
}

// logUser logs the request's user field (it decides nothing).
func (h *Handler) logUser(r *http.Request, user string) {
	if user != "" {
		h.log.InfoContext(r.Context(), "openai request", "user", user)
	}
}

// chatPrompt checks the messages' wire shape and builds the prompt
// (frontdoor.ChatPrompt: contents tokenized as plain text, never control
// tokens; bytes bounded before tokenizing; a prompt over the context
// refused).
func (h *Handler) chatPrompt(ctx context.Context, in []chatMessage, tools *frontdoor.ToolSpec, v chat.Vars) ([]int32, error) {
	msgs, err := chatMessages(in)
	if err != nil {
		return nil, err
	}
	if err := frontdoor.CheckToolMessages(msgs, 0); err != nil {
		return nil, err
	}
	_, prompt, err := h.door.ChatPromptTools(ctx, msgs, 0, frontdoor.Reject, v, tools)
	return prompt, err
}

// chatMessages checks the messages' wire shape and turns them into the
// conversation the template renders (their tool calls and results are
// frontdoor.CheckToolMessages' to check).
func chatMessages(in []chatMessage) ([]chat.Message, error) {
	if len(in) == 0 {
		return nil, badParam("messages", "at least one message is required")
	}
	msgs := make([]chat.Message, len(in))
	for i, m := range in {
		field := func(name string) string { return fmt.Sprintf("messages[%d].%s", i, name) }
		switch m.Role {
		case "system", "user", "assistant", "tool":
		case "developer":
			m.Role = "system"
		default:
			return nil, badParam(field("role"), "%q: want system, user, assistant or tool", m.Role)
		}
		calls, err := messageCalls(i, m.ToolCalls)
		if err != nil {
			return nil, err
		}
		if !utf8.ValidString(m.ReasoningContent) || !utf8.ValidString(m.Name) || !utf8.ValidString(m.ToolCallID) {
			return nil, badParam(field("content"), "not valid UTF-8")
		}
		c, err := contentOf(i, m.Content)
		if err != nil {
			return nil, err
		}
		if !utf8.ValidString(c) {
			return nil, badParam(fmt.Sprintf("messages[%d].content", i), "not valid UTF-8")
		}
		msgs[i] = chat.Message{Role: m.Role, Content: c, ToolCalls: calls, ReasoningContent: m.ReasoningContent}
		if m.Role == "tool" {
			msgs[i].ToolCallID, msgs[i].Name = m.ToolCallID, m.Name
		}
	}
	return msgs, nil
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
