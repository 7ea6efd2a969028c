package openai

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/tokenizer"
	"github.com/weft-inference/weft/scheduler"
)

// Scheduler is what the handlers need from the batching loop;
// *scheduler.Scheduler implements it.
type Scheduler interface {
	Submit(ctx context.Context, r scheduler.Request) (*scheduler.Stream, error)
	Drain()
}

var _ Scheduler = (*scheduler.Scheduler)(nil)

// Tokenizer turns text into token ids; *tokenizer.Tokenizer implements it.
type Tokenizer interface {
	Encode(text string, addSpecial, parseSpecial bool) []int32
	// EncodeSegments tokenizes the concatenated segments, recognising
	// control-token text only in segments with ParseSpecial set.
	EncodeSegments(segs []tokenizer.Segment, addSpecial bool) []int32
	// TokenBytes is the bytes one token adds to the text (logprobs).
	TokenBytes(id int32) []byte
	// Decode is the text of a whole sequence (echo of a token-id prompt).
	Decode(ids []int32) string
}

// bosTokenizer is optionally implemented by a Tokenizer whose model wants
// a BOS token in front of every prompt.
type bosTokenizer interface {
	BOS() int32
	AddBOS() bool
}

// ChatRenderer renders a conversation, split into the template's own text
// and the message contents; *chat.Template implements it.
type ChatRenderer interface {
	RenderSegments(msgs []chat.Message, addGenerationPrompt bool) ([]chat.Segment, error)
}

// PromptBytesPerToken is the default bytes-per-token bound behind
// MaxPromptBytes (the gRPC server's default too).
const PromptBytesPerToken = 16

// Config configures the handlers.
type Config struct {
	// Scheduler runs the requests. Required.
	Scheduler Scheduler
	// Tokenizer encodes prompts. Required.
	Tokenizer Tokenizer
	// Chat renders chat prompts; nil: /v1/chat/completions answers 400.
	Chat ChatRenderer
	// ModelNames are the model ids served (/v1/models lists them, a
	// request may name any); a request naming another gets 404. Required.
	ModelNames []string
	// ContextLen is the prompt plus generated tokens accepted. Required.
	ContextLen int
	// VocabSize bounds token ids in prompts and stop_token_ids. Required.
	VocabSize int
	// AuthToken, when set, is required as "Authorization: Bearer <token>"
	// on every endpoint but /health.
	AuthToken string
	// MaxPromptBytes bounds a prompt's text before tokenizing; 0:
	// ContextLen*PromptBytesPerToken.
	MaxPromptBytes int
	// MaxBodyBytes bounds a request body; 0: 2*MaxPromptBytes + 64 KiB.
	MaxBodyBytes int64
	// TokenizeConcurrency bounds how many requests tokenize at once; 0:
	// GOMAXPROCS.
	TokenizeConcurrency int
	// QueueTimeout, when > 0, fails requests not admitted in time.
	QueueTimeout time.Duration
	// SendStallTimeout cuts off a stream whose client has accepted no
	// byte for this long (each write of an SSE event or a response has
	// this deadline); its sequences are cancelled. 0: 30s.
	SendStallTimeout time.Duration
	// Registry receives the HTTP metrics (weft_http_*); nil: a private
	// registry (the metrics exist but nobody scrapes them).
	Registry *prometheus.Registry
	// Logger logs one line per request (at debug for /health) and the
	// failures; every line carries request_id. nil: discard.
	Logger *slog.Logger

	// onFinal, if set, is called with every request's Final (tests).
	onFinal func(id string, f *scheduler.Final)
	// onSlowReader, if set, is called when a response is cut off (tests).
	onSlowReader func()
}

func (c *Config) validate() error {
	bad := func(format string, args ...any) error { return fmt.Errorf("openai: "+format, args...) }
	switch {
	case c.Scheduler == nil:
		return errors.New("openai: Config.Scheduler is required")
	case c.Tokenizer == nil:
		return errors.New("openai: Config.Tokenizer is required")
	case len(c.ModelNames) == 0 || slices.Contains(c.ModelNames, ""):
		return errors.New("openai: Config.ModelNames is required and holds no empty id")
	case c.ContextLen <= 0:
		return bad("ContextLen %d must be > 0", c.ContextLen)
	case c.VocabSize <= 0:
		return bad("VocabSize %d must be > 0", c.VocabSize)
	case c.MaxPromptBytes < 0 || c.MaxBodyBytes < 0 || c.TokenizeConcurrency < 0 || c.SendStallTimeout < 0:
		return bad("MaxPromptBytes, MaxBodyBytes, TokenizeConcurrency and SendStallTimeout must be >= 0")
	}
	if c.SendStallTimeout == 0 {
		c.SendStallTimeout = 30 * time.Second
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.MaxPromptBytes == 0 {
		c.MaxPromptBytes = c.ContextLen * PromptBytesPerToken
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 2*int64(c.MaxPromptBytes) + 64<<10
	}
	if c.TokenizeConcurrency == 0 {
		c.TokenizeConcurrency = goruntime.GOMAXPROCS(0)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Logger = slog.New(requestIDHandler{c.Logger.Handler()})
	return nil
}
