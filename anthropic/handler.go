package anthropic

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/scheduler"
)

// Scheduler is what the handlers need from the batching loop;
// *scheduler.Scheduler implements it.
type Scheduler interface {
	Submit(ctx context.Context, r scheduler.Request) (*scheduler.Stream, error)
	Limits() scheduler.Limits
}

var _ Scheduler = (*scheduler.Scheduler)(nil)

// Config configures the handlers.
type Config struct {
	// Scheduler runs the requests. Required.
	Scheduler Scheduler
	// Door is the process's request pipeline, shared with every other
	// front door. Required; its Limits are Scheduler's.
	Door *frontdoor.Door
	// ModelNames are the model ids served; a request naming another gets
	// 404 not_found_error. Required.
	ModelNames []string
	// AuthToken, when set, is required as "x-api-key: <token>" or
	// "Authorization: Bearer <token>" (the OpenAI door's token).
	AuthToken string
	// MaxBodyBytes bounds a request body; 0: twice the Door's
	// MaxPromptBytes + 64 KiB (the OpenAI door's default).
	MaxBodyBytes int64

	// onFinal, if set, is called with every request's Final (tests).
	onFinal func(f *scheduler.Final)
	// seed, if set, gives every request's sampling seed (tests); else each
	// request gets a random one (the Door's).
	seed func() uint64
}

func (c *Config) validate() error {
	switch {
	case c.Scheduler == nil:
		return errors.New("anthropic: Config.Scheduler is required")
	case c.Door == nil:
		return errors.New("anthropic: Config.Door is required")
	case c.Door.Limits() != c.Scheduler.Limits():
		return errors.New("anthropic: the Door was built with other limits than the Scheduler's")
	case len(c.ModelNames) == 0 || slices.Contains(c.ModelNames, ""):
		return errors.New("anthropic: Config.ModelNames is required and holds no empty id")
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("anthropic: MaxBodyBytes %d must be >= 0", c.MaxBodyBytes)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 2*int64(c.Door.MaxPromptBytes()) + 64<<10
	}
	return nil
}

// Routes are the patterns the Handler serves (cmd/weft mounts each on the
// HTTP listener's mux).
var Routes = []string{"POST /v1/messages", "POST /v1/messages/count_tokens"}

// Handler serves Anthropic's Messages API; it is an http.Handler.
type Handler struct {
	cfg     Config
	mux     *http.ServeMux
	door    *frontdoor.Door
	log     *slog.Logger
	serving atomic.Bool
}

var _ http.Handler = (*Handler)(nil)

// New builds the handlers; they refuse requests with 529 until
// SetServing(true).
func New(cfg Config) (*Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), door: cfg.Door, log: cfg.Door.Logger()}
	h.mux.Handle(Routes[0], h.authed(h.messages))
	h.mux.Handle(Routes[1], h.authed(h.countTokens))
	return h, nil
}

// LoadingHandler answers the Messages routes while the model loads: the
// same authentication, then 529 overloaded_error with Retry-After, in
// Anthropic's error shape (the OpenAI door's loading handler answers its
// own routes in OpenAI's). cmd/weft mounts it on Routes beside that one.
func LoadingHandler(token string) http.Handler {
	h := &Handler{cfg: Config{AuthToken: token}}
	mux := http.NewServeMux()
	for _, p := range Routes {
		mux.Handle(p, h.authed(nil)) // never called: h is not serving
	}
	return mux
}

// ServeHTTP implements http.Handler. A request without an id in its
// context (served alone, not under the OpenAI door's layer) gets one.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if frontdoor.RequestID(r.Context()) == "" {
		ctx, id := frontdoor.WithRequestID(r.Context(), r.Header.Get(frontdoor.RequestIDHeader))
		w.Header().Set(frontdoor.RequestIDHeader, id)
		r = r.WithContext(ctx)
	}
	h.mux.ServeHTTP(w, r)
}

// SetServing turns admission on or off.
func (h *Handler) SetServing(ok bool) { h.serving.Store(ok) }

// BeginDrain refuses new requests (529 overloaded_error); in-flight ones
// go on. The scheduler's drain is the caller's (one for every door).
func (h *Handler) BeginDrain() { h.SetServing(false) }

// authed requires the token as x-api-key or a bearer token (compared in
// constant time) when one is configured, and refuses while not serving.
func (h *Handler) authed(f http.HandlerFunc) http.Handler {
	want := []byte(h.cfg.AuthToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(want) > 0 {
			tok := r.Header.Get("X-Api-Key")
			if tok == "" {
				scheme, t, _ := strings.Cut(r.Header.Get("Authorization"), " ")
				if strings.EqualFold(scheme, "bearer") {
					tok = t
				}
			}
			if subtle.ConstantTimeCompare([]byte(tok), want) != 1 {
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

// decode reads the body, bounded by MaxBodyBytes, into a request.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request) (*messagesRequest, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		return nil, err
	}
	return decodeRequest(body)
}

// turn is a request's prompt and how its reply is read.
type turn struct {
	prompt   []int32
	tools    *frontdoor.ToolSpec // nil: no tools
	thinking thinking
	// reasoning: the reply is read for reasoning even without tools
	// (thinking is on, or the prompt opened the reasoning block).
	reasoning bool
}

// prompt checks the model, the tools, thinking and the conversation and
// renders them through the Door (contents as plain text, bytes bounded,
// over the context refused).
func (h *Handler) prompt(ctx context.Context, req *messagesRequest) (*turn, error) {
	if !slices.Contains(h.cfg.ModelNames, req.Model) {
		return nil, &requestError{status: http.StatusNotFound, typ: "not_found_error",
			msg: fmt.Sprintf("model: %q does not exist; this server serves %q", req.Model, h.cfg.ModelNames)}
	}
	if !h.door.HasChat() {
		return nil, errNoChatTemplate
	}
	tools, err := h.toolSpecOf(req)
	if err != nil {
		return nil, err
	}
	var v chat.Vars
	th, err := thinkingOf(req, &v)
	if err != nil {
		return nil, err
	}
	msgs, err := conversation(req)
	if err != nil {
		return nil, err
	}
	_, prompt, err := h.door.ChatPromptTools(ctx, msgs, 0, frontdoor.Reject, v, tools)
	if err != nil {
		return nil, err
	}
	t := &turn{prompt: prompt, tools: tools, thinking: th}
	t.reasoning = th.on || !tools.Forced() && h.door.OpensReasoning(prompt)
	return t, nil
}

func (h *Handler) countTokens(w http.ResponseWriter, r *http.Request) {
	req, err := h.decode(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	t, err := h.prompt(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, countTokensResponse{InputTokens: len(t.prompt)})
}

// f32 is an optional float parameter as the sampler takes it (def when
// absent); its range is sample.Params.Validate's.
func f32(param string, v *float64, def float32) (float32, error) {
	if v == nil {
		return def, nil
	}
	if math.IsNaN(*v) || math.Abs(*v) > math.MaxFloat32 {
		return 0, badParam(param, "%v is not a finite number", *v)
	}
	return float32(*v), nil
}

// request builds the scheduler request. max_tokens is required, as
// Anthropic requires it; every range is the scheduler's or the sampler's
// (Submit checks them).
func (h *Handler) request(id string, t *turn, req *messagesRequest) (scheduler.Request, error) {
	if req.MaxTokens == nil {
		return scheduler.Request{}, badParam("max_tokens", "is required")
	}
	if t.thinking.budget > 0 && t.thinking.budget >= *req.MaxTokens {
		return scheduler.Request{}, badParam("thinking.budget_tokens", "%d must be less than max_tokens (%d)", t.thinking.budget, *req.MaxTokens)
	}
	var sp sample.Params
	var err error
	// Anthropic's defaults: temperature 1; top_p and top_k off.
	if sp.Temperature, err = f32("temperature", req.Temperature, 1); err != nil {
		return scheduler.Request{}, err
	}
	if sp.TopP, err = f32("top_p", req.TopP, 1); err != nil {
		return scheduler.Request{}, err
	}
	if req.TopK != nil {
		sp.TopK = *req.TopK
	}
	if sp.Constraint, err = h.door.ToolConstraint(t.tools); err != nil {
		return scheduler.Request{}, err
	}
	o := frontdoor.Options{Sampling: sp, MaxTokens: req.MaxTokens, StopStrings: req.StopSequences}
	if h.cfg.seed != nil {
		o.Sampling.Seed, o.SeedSet = h.cfg.seed(), true
	}
	return h.door.Request(id, t.prompt, o), nil
}

// newID makes a message id ("msg_" and 24 hex digits).
func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return "msg_" + hex.EncodeToString(b[:])
}

// stopReason is Anthropic's stop_reason for f and the stop sequence that
// matched; ok false when f ended the request with an error.
func stopReason(f *scheduler.Final) (reason string, seq *string, ok bool) {
	switch f.Reason {
	case scheduler.FinishEOS:
		return "end_turn", nil, true
	case scheduler.FinishStopSequence:
		s := f.StopMatched
		return "stop_sequence", &s, true
	case scheduler.FinishLength:
		return "max_tokens", nil, true
	}
	return "", nil, false
}

// finalErr is the error of a Final that did not end normally.
func finalErr(f *scheduler.Final) error {
	if f.Err != nil {
		return f.Err
	}
	if f.Reason == scheduler.FinishCancelled {
		return context.Canceled
	}
	return errors.New("request ended without a result")
}

// update is one event of the stream, or the error that ended it.
type update struct {
	ev  scheduler.Event
	err error
}

func (h *Handler) messages(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	req, err := h.decode(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel() // the client left or the handler returned: the sequence is cancelled
	t, err := h.prompt(ctx, req)
	if err != nil {
		writeError(w, err)
		return
	}
	id := newID()
	sr, err := h.request(id, t, req)
	if err != nil {
		writeError(w, err)
		return
	}
	if req.Metadata != nil && req.Metadata.UserID != "" {
		h.log.InfoContext(ctx, "anthropic request", "user_id", req.Metadata.UserID)
	}
	st, err := h.cfg.Scheduler.Submit(ctx, sr)
	if err != nil {
		writeError(w, err)
		return
	}
	updates := make(chan update)
	put := func(u update) error {
		select {
		case updates <- u:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	stalled := h.door.Follow(ctx, st, frontdoor.Follow{
		Door:  frontdoor.DoorAnthropic,
		Start: start,
		Send:  func(ev scheduler.Event) error { return put(update{ev: ev}) },
		Done: func(res frontdoor.Followed) {
			if res.Err != nil {
				put(update{err: res.Err})
			}
		},
		Finished: h.cfg.onFinal,
	})
	out := &writer{ctx: ctx, w: w, rc: http.NewResponseController(w), stall: h.door.SendStallTimeout(), log: h.log}
	defer out.rc.SetWriteDeadline(time.Time{})
	msg := messageResponse{ID: id, Type: "message", Role: "assistant", Content: []contentBlock{}, Model: req.Model,
		Usage: usage{InputTokens: len(t.prompt)}}
	var send func(string, any) error
	if req.Stream {
		send = out.event
	}
	bs := newBlocks(send)
	reply := h.door.NewReply(t.tools, t.prompt, frontdoor.ReplyOptions{Reasoning: t.reasoning, NewID: newToolUseID})
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		if out.event("message_start", messageStartEvent{Type: "message_start", Message: msg}) != nil {
			return
		}
	}
	// A reply read as plain text is one text block, open from the start
	// (a parsed one opens each block when its first event comes).
	if reply == nil && bs.start(contentBlock{Type: "text"}) != nil {
		return
	}
	if req.Stream && out.event("ping", typeEvent{Type: "ping"}) != nil {
		return
	}
	fail := func(err error) {
		if req.Stream {
			out.event("error", errorBody{Type: "error", Error: apiErrorOf(err)})
		} else {
			writeError(w, err)
		}
	}
	for {
		var u update
		select {
		case u = <-updates:
		case <-stalled:
			return // a slow reader: the handler returns, ctx ends, the sequence is cancelled
		case <-ctx.Done():
			return
		}
		if u.err != nil {
			fail(u.err)
			return
		}
		f := u.ev.Final
		if reply != nil {
			evs := reply.Push(u.ev.Text, len(u.ev.Tokens))
			if f != nil {
				evs = append(evs, reply.Finish()...)
			}
			for _, ev := range evs {
				if bs.apply(ev) != nil {
					return
				}
			}
		} else if bs.text("text", u.ev.Text) != nil {
			return
		}
		if f == nil {
			continue
		}
		reason, seq, ok := stopReason(f)
		if !ok {
			fail(finalErr(f))
			return
		}
		if reply != nil {
			calls, err := reply.Outcome(f)
			if err != nil {
				h.log.WarnContext(ctx, "anthropic: malformed tool call", "err", err)
				fail(err)
				return
			}
			if calls {
				reason, seq = "tool_use", nil
			}
		}
		if bs.close() != nil {
			return
		}
		us := usage{InputTokens: f.PromptTokens, OutputTokens: f.CompletionTokens, CacheReadInputTokens: f.CachedTokens}
		if !req.Stream {
			msg.Content = bs.content()
			msg.StopReason, msg.StopSequence, msg.Usage = &reason, seq, us
			b, err := json.Marshal(msg)
			if err != nil {
				writeError(w, err)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			out.raw(append(b, '\n'))
			return
		}
		md := messageDeltaEvent{Type: "message_delta", Usage: us}
		md.Delta.StopReason, md.Delta.StopSequence = &reason, seq
		if out.event("message_delta", md) != nil {
			return
		}
		out.event("message_stop", typeEvent{Type: "message_stop"})
		return
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// writer writes one response, each write within the Door's
// SendStallTimeout: a client that accepts nothing for that long fails the
// write (and so the request).
type writer struct {
	ctx   context.Context
	w     http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
	log   *slog.Logger
}

func (o *writer) raw(b []byte) error {
	o.rc.SetWriteDeadline(time.Now().Add(o.stall))
	_, err := o.w.Write(b)
	if err == nil {
		err = o.rc.Flush()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		o.log.WarnContext(o.ctx, "anthropic: slow reader cut off", "stall", o.stall)
	}
	return err
}

// event writes one SSE event: its event: line, then v as its data: line.
func (o *writer) event(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(b)+len(name)+16)
	buf = append(buf, "event: "...)
	buf = append(buf, name...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	return o.raw(buf)
}
