package openai

import (
	"context"
	"errors"
	"fmt"
	"slices"

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

// Tokenizer tells the bytes of tokens; *tokenizer.Tokenizer implements
// it. Tokenizing is the Door's.
type Tokenizer interface {
	// TokenBytes is the bytes one token adds to the text (logprobs).
	TokenBytes(id int32) []byte
	// Decode is the text of a whole sequence (echo of a token-id prompt).
	Decode(ids []int32) string
}

// Config configures the handlers.
type Config struct {
	// Scheduler runs the requests. Required.
	Scheduler Scheduler
	// Door is the process's request pipeline, shared with every other
	// front door: byte bounds, tokenizing, chat prompts (a Door without a
	// template: /v1/chat/completions answers 400), defaults, structured
	// output, request ids and logging, following a stream, the stall
	// timeout and the per-request metrics. Required; its Limits are
	// Scheduler's.
	Door *frontdoor.Door
	// Tokenizer gives token bytes (logprobs) and text (echo). Required.
	Tokenizer Tokenizer
	// ModelNames are the model ids served (/v1/models lists them, a
	// request may name any); a request naming another gets 404. Required.
	ModelNames []string
	// AuthToken, when set, is required as "Authorization: Bearer <token>"
	// on every endpoint but /health.
	AuthToken string
	// MaxBodyBytes bounds a request body; 0: twice the Door's
	// MaxPromptBytes + 64 KiB.
	MaxBodyBytes int64
	// Registry receives the HTTP metrics (weft_http_*); nil: a private
	// registry (the metrics exist but nobody scrapes them).
	Registry *prometheus.Registry

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
	case c.Door == nil:
		return errors.New("openai: Config.Door is required")
	case c.Tokenizer == nil:
		return errors.New("openai: Config.Tokenizer is required")
	case c.Door.Limits() != c.Scheduler.Limits():
		return errors.New("openai: the Door was built with other limits than the Scheduler's")
	case len(c.ModelNames) == 0 || slices.Contains(c.ModelNames, ""):
		return errors.New("openai: Config.ModelNames is required and holds no empty id")
	case c.MaxBodyBytes < 0:
		return bad("MaxBodyBytes %d must be >= 0", c.MaxBodyBytes)
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 2*int64(c.Door.MaxPromptBytes()) + 64<<10
	}
	return nil
}
