package openai

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/scheduler"
)

// Scheduler is what the handlers need from the batching loop;
// *scheduler.Scheduler implements it.
type Scheduler interface {
	Submit(ctx context.Context, r scheduler.Request) (*scheduler.Stream, error)
	Drain()
	// Limits are the bounds Submit enforces (the context, the stop
	// conditions...): the handlers fill defaults from them and leave the
	// checks to Submit.
	Limits() scheduler.Limits
}

var _ Scheduler = (*scheduler.Scheduler)(nil)

// Tokenizer turns text into token ids; *tokenizer.Tokenizer implements it.
type Tokenizer interface {
	frontdoor.Tokenizer
	// TokenBytes is the bytes one token adds to the text (logprobs).
	TokenBytes(id int32) []byte
	// Decode is the text of a whole sequence (echo of a token-id prompt).
	Decode(ids []int32) string
}

// Config configures the handlers.
type Config struct {
	// Scheduler runs the requests. Required.
	Scheduler Scheduler
	// Tokenizer encodes prompts. Required.
	Tokenizer Tokenizer
	// Chat renders chat prompts; nil: /v1/chat/completions answers 400.
	Chat frontdoor.ChatRenderer
	// ModelNames are the model ids served (/v1/models lists them, a
	// request may name any); a request naming another gets 404. Required.
	ModelNames []string
	// AuthToken, when set, is required as "Authorization: Bearer <token>"
	// on every endpoint but /health.
	AuthToken string
	// MaxPromptBytes bounds a prompt's text before tokenizing; 0: the
	// context length times frontdoor.PromptBytesPerToken.
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
		c.MaxPromptBytes = c.Scheduler.Limits().ContextLen * frontdoor.PromptBytesPerToken
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 2*int64(c.MaxPromptBytes) + 64<<10
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Logger = slog.New(requestIDHandler{c.Logger.Handler()})
	return nil
}
