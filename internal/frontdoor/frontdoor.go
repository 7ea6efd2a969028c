package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	goruntime "runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/runtime/tokenizer"
	"github.com/weft-inference/weft/scheduler"
)

// PromptBytesPerToken is the default bytes-per-token bound behind
// Config.MaxPromptBytes. Typical text runs 3 to 5 bytes per token (English
// on a 32k SentencePiece vocabulary about 4, CJK about 3 per character); 16
// is four times that, so a prompt that fits the context in tokens is all
// but never refused for its bytes, while tokenizing the longest accepted
// text costs a bounded, context-sized amount of work and memory.
const PromptBytesPerToken = 16

// Neutral field names of this package's errors (a door renames them).
const (
	FieldChatContents = "messages.content" // the chat contents, summed
	FieldChatPrompt   = "messages"         // the rendered chat prompt
)

// Tokenizer turns text into token ids and back; *tokenizer.Tokenizer
// implements it.
type Tokenizer interface {
	Encode(text string, addSpecial, parseSpecial bool) []int32
	// EncodeSegments tokenizes the concatenated segments, recognising
	// control-token text only in segments with ParseSpecial set.
	EncodeSegments(segs []tokenizer.Segment, addSpecial bool) []int32
	// Decode is the text of ids, each in [0, VocabSize()).
	Decode(ids []int32) string
	// VocabSize is the number of token ids.
	VocabSize() int
}

// bosTokenizer is optionally implemented by a Tokenizer whose model wants
// a BOS token in front of every prompt (chat prompts whose template does
// not write one get it).
type bosTokenizer interface {
	BOS() int32
	AddBOS() bool
}

// ChatRenderer renders a conversation into prompt text, split into the
// template's own text and the message contents; *chat.Template implements
// it.
type ChatRenderer interface {
	RenderSegments(msgs []chat.Message, addGenerationPrompt bool) ([]chat.Segment, error)
}

// Config configures a Door.
type Config struct {
	// Tokenizer tokenizes prompts. Required.
	Tokenizer Tokenizer
	// Chat renders chat prompts; nil: ChatPrompt fails with ErrNoChat.
	Chat ChatRenderer
	// Limits are the scheduler's (Scheduler.Limits): the context bounds
	// chat prompts and the default max_tokens. Limits.ContextLen >= 2 is
	// required.
	Limits scheduler.Limits
	// MaxPromptBytes bounds the bytes of text one request may have
	// tokenized; longer is a *BytesError before any tokenizing. Default
	// Limits.ContextLen * PromptBytesPerToken.
	MaxPromptBytes int
	// TokenizeConcurrency bounds how many requests tokenize at once (the
	// rest wait, cancellably). Default GOMAXPROCS.
	TokenizeConcurrency int
	// QueueTimeout, when > 0, is every request's Request.QueueTimeout: a
	// request not admitted in time ends with ErrQueueTimeout (Follow).
	QueueTimeout time.Duration
	// SendStallTimeout cuts off a stream whose client has accepted nothing
	// for this long: Follow's stall channel fires while one send is
	// blocked this long, and the HTTP door gives each write this deadline.
	// Default DefaultSendStallTimeout.
	SendStallTimeout time.Duration
	// Registry receives the per-request metrics (metrics.go); nil: a
	// private registry (the metrics exist but nobody scrapes them).
	Registry prometheus.Registerer
	// ToolFormat names the tool-call format of the model's replies
	// (toolcall.ParseFormat: hermes, llama3, mistral...), overriding the
	// one detected from the chat template. "" detects it (Tools).
	ToolFormat string
	// Logger is every door's logger; Door.Logger adds each request's id
	// (WithRequestID) to its lines. Default slog.Default().
	Logger *slog.Logger
}

// DefaultSendStallTimeout is Config.SendStallTimeout's default.
const DefaultSendStallTimeout = 30 * time.Second

func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("frontdoor: config: %s", fmt.Sprintf(format, args...))
	}
	if c.Tokenizer == nil {
		return errors.New("frontdoor: config: nil Tokenizer")
	}
	if c.Limits.ContextLen < 2 {
		return bad("Limits.ContextLen %d must be >= 2", c.Limits.ContextLen)
	}
	if c.MaxPromptBytes == 0 {
		c.MaxPromptBytes = c.Limits.ContextLen * PromptBytesPerToken
	}
	if c.MaxPromptBytes < 0 {
		return bad("MaxPromptBytes %d must be > 0", c.MaxPromptBytes)
	}
	if c.TokenizeConcurrency == 0 {
		c.TokenizeConcurrency = goruntime.GOMAXPROCS(0)
	}
	if c.TokenizeConcurrency < 0 {
		return bad("TokenizeConcurrency %d must be > 0", c.TokenizeConcurrency)
	}
	if c.QueueTimeout < 0 {
		return bad("QueueTimeout %v must be >= 0", c.QueueTimeout)
	}
	if c.SendStallTimeout == 0 {
		c.SendStallTimeout = DefaultSendStallTimeout
	}
	if c.SendStallTimeout < 0 {
		return bad("SendStallTimeout %v must be > 0", c.SendStallTimeout)
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Door is the pipeline every front door shares: it turns a client's
// prompt and options into a scheduler.Request and follows the request's
// stream to its Final. One Door serves a whole process (all its front
// doors); it is safe for concurrent use.
type Door struct {
	cfg     Config
	sem     chan struct{} // one slot per tokenization in progress
	log     *slog.Logger  // cfg.Logger with request ids
	metrics *metrics
	formats formatCache
	tools   Tools
}

// New returns a Door and registers its metrics in cfg.Registry.
func New(cfg Config) (*Door, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, fmt.Errorf("frontdoor: metrics: %w", err)
	}
	tools, err := toolsOf(&cfg)
	if err != nil {
		return nil, err
	}
	return &Door{
		tools:   tools,
		cfg:     cfg,
		sem:     make(chan struct{}, cfg.TokenizeConcurrency),
		log:     slog.New(requestIDHandler{cfg.Logger.Handler()}),
		metrics: m,
	}, nil
}

// Logger is the logger every door logs with: Config.Logger, each line
// carrying the request_id of its context (WithRequestID).
func (d *Door) Logger() *slog.Logger { return d.log }

// SendStallTimeout is how long one send to a client may block before the
// stream is cut off.
func (d *Door) SendStallTimeout() time.Duration { return d.cfg.SendStallTimeout }

// Limits returns the scheduler's limits the Door was built with.
func (d *Door) Limits() scheduler.Limits { return d.cfg.Limits }

// MaxPromptBytes returns the byte bound on prompt text.
func (d *Door) MaxPromptBytes() int { return d.cfg.MaxPromptBytes }

// HasChat reports whether ChatPrompt can render.
func (d *Door) HasChat() bool { return d.cfg.Chat != nil }

// Errors of this package's own making.
var (
	// ErrPromptBytes is wrapped by *BytesError.
	ErrPromptBytes = errors.New("prompt text too long")
	// ErrNoChat: the Door has no chat renderer.
	ErrNoChat = errors.New("no chat template")
)

// BytesError is prompt text over MaxPromptBytes, refused before
// tokenizing. It wraps ErrPromptBytes.
type BytesError struct {
	Field      string // the text's field (the caller's name, or FieldChat*)
	Bytes      int    // the text's bytes
	MaxBytes   int    // Config.MaxPromptBytes
	ContextLen int    // Limits.ContextLen
	// Derived is set when MaxBytes is the default,
	// ContextLen*PromptBytesPerToken.
	Derived bool
}

func (e *BytesError) Error() string { return e.Field + ": " + e.Detail() }

// Detail is the message without the field name (a front door puts its own
// in front).
func (e *BytesError) Detail() string {
	msg := fmt.Sprintf("%d bytes of text, at most %d", e.Bytes, e.MaxBytes)
	if e.Derived {
		msg += fmt.Sprintf(" (%d bytes per token of the %d-token context)", PromptBytesPerToken, e.ContextLen)
	}
	return msg
}

// Unwrap returns ErrPromptBytes.
func (e *BytesError) Unwrap() error { return ErrPromptBytes }

// TemplateError is the chat template refusing a conversation (it raised
// an error, or went over its execution limits).
type TemplateError struct{ Err error }

func (e *TemplateError) Error() string { return "chat template: " + e.Err.Error() }

// Unwrap returns the template's error.
func (e *TemplateError) Unwrap() error { return e.Err }

// CheckPromptBytes refuses a text of n bytes in field when it is longer
// than MaxPromptBytes.
func (d *Door) CheckPromptBytes(field string, n int) error {
	if n <= d.cfg.MaxPromptBytes {
		return nil
	}
	return &BytesError{Field: field, Bytes: n, MaxBytes: d.cfg.MaxPromptBytes, ContextLen: d.cfg.Limits.ContextLen,
		Derived: d.cfg.MaxPromptBytes == d.cfg.Limits.ContextLen*PromptBytesPerToken}
}

// tokenize runs f holding one of the TokenizeConcurrency slots, so that a
// flood of large prompts queues here instead of taking every CPU (and
// memory) from the step loop. It gives up when ctx ends.
func (d *Door) tokenize(ctx context.Context, f func()) error {
	select {
	case d.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-d.sem }()
	f()
	return nil
}

// Encode tokenizes text under the concurrency bound. The caller checks
// its bytes first (CheckPromptBytes).
func (d *Door) Encode(ctx context.Context, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	var ids []int32
	err := d.tokenize(ctx, func() { ids = d.cfg.Tokenizer.Encode(text, addSpecial, parseSpecial) })
	return ids, err
}

// EncodeSegments tokenizes segs under the concurrency bound.
func (d *Door) EncodeSegments(ctx context.Context, segs []tokenizer.Segment, addSpecial bool) ([]int32, error) {
	var ids []int32
	err := d.tokenize(ctx, func() { ids = d.cfg.Tokenizer.EncodeSegments(segs, addSpecial) })
	return ids, err
}

// Options are a request's generation options, as a door decoded them from
// its wire shape. No value is checked here: Submit checks them all
// (Limits, sample.Params.Validate).
type Options struct {
	// Sampling holds the sampling parameters; its Seed is replaced by a
	// random one unless SeedSet (Requests derives the seed of each
	// choice).
	Sampling sample.Params
	SeedSet  bool
	// MaxTokens: nil takes Limits.MaxTokensFor(len(prompt)); any other
	// value goes to the scheduler as it is (Submit bounds it).
	MaxTokens         *int
	MinTokens         int
	StopStrings       []string
	StopTokenIDs      []int32
	IncludeStopString bool
	IgnoreEOS         bool
	Priority          int
}

// Request makes the scheduler request for prompt (token ids) with o, the
// defaults filled in. It checks nothing: Submit does.
func (d *Door) Request(id string, prompt []int32, o Options) scheduler.Request {
	return d.Requests(id, prompt, o, 1)[0]
}

// Requests makes the n requests of n choices (n >= 1) of one prompt, the
// same but for their seeds: with SeedSet, choice i samples with
// Sampling.Seed + i (so a seeded request is reproducible choice by
// choice); without, each choice gets its own random seed.
func (d *Door) Requests(id string, prompt []int32, o Options, n int) []scheduler.Request {
	r := scheduler.Request{
		ID:                id,
		Prompt:            prompt,
		Sampling:          o.Sampling,
		MinTokens:         o.MinTokens,
		StopStrings:       o.StopStrings,
		IncludeStopString: o.IncludeStopString,
		StopTokenIDs:      o.StopTokenIDs,
		IgnoreEOS:         o.IgnoreEOS,
		Priority:          o.Priority,
		QueueTimeout:      d.cfg.QueueTimeout,
	}
	if o.MaxTokens != nil {
		r.MaxTokens = *o.MaxTokens
	} else {
		r.MaxTokens = d.cfg.Limits.MaxTokensFor(len(prompt))
	}
	out := make([]scheduler.Request, max(n, 1))
	for i := range out {
		out[i] = r
		if o.SeedSet {
			out[i].Sampling.Seed = o.Sampling.Seed + uint64(i)
		} else {
			out[i].Sampling.Seed = rand.Uint64()
		}
	}
	return out
}
