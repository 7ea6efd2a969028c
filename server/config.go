package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/scheduler"
)

// Scheduler is what the server needs from the batching loop;
// *scheduler.Scheduler implements it.
type Scheduler interface {
	Submit(ctx context.Context, r scheduler.Request) (*scheduler.Stream, error)
	// Limits are the bounds Submit enforces: the server reports them
	// (GetModelInfo) and fills defaults from them, and checks none itself.
	Limits() scheduler.Limits
	Stats() scheduler.Stats
	Drain()
}

var _ Scheduler = (*scheduler.Scheduler)(nil)

// Tokenizer tells the vocabulary's size (GetModelInfo);
// *tokenizer.Tokenizer implements it. Tokenizing and detokenizing are the
// Door's.
type Tokenizer interface {
	Decode(ids []int32) string
	VocabSize() int
}

// KVCache describes the paged KV pool for GetModelInfo.
type KVCache struct {
	BlockSize     int    // token positions per block
	NumBlocks     int    // blocks in the pool
	BytesPerBlock int64  // bytes of one block over the layers it holds (all, or one layer group of a windowed pool), K and V
	Type          string // "f16" or "f32"
}

// ModelInfo describes the served model for GetModelInfo.
type ModelInfo struct {
	Name           string         // general.name or the file's base name
	Architecture   string         // "llama", ...
	VocabSize      int            // tokens in the vocabulary
	TensorTypes    map[string]int // tensor type -> number of tensors
	Backend        string         // "cpu ...", "cuda ..."
	KV             KVCache        // the KV pool
	BOS            int32          // BOS id or -1
	EOG            []int32        // end-of-generation ids
	ParameterCount int64          // parameters (0 if unknown)
}

// Config configures a Server. Scheduler, Door and Tokenizer are
// required; the rest has defaults.
type Config struct {
	// Scheduler runs the requests. Required.
	Scheduler Scheduler
	// Door is the process's request pipeline, shared with every other
	// front door: byte bounds, tokenizing, chat prompts, defaults,
	// structured output, request ids and logging, following a stream and
	// the per-request metrics. Required; its Limits are Scheduler's.
	Door *frontdoor.Door
	// Tokenizer tells the vocabulary's size (Info.VocabSize's default).
	// Required.
	Tokenizer Tokenizer
	// ChatFallback is empty when the Door's chat template is the model's
	// own, else the name of the fallback it is ("chatml", a file);
	// GetModelInfo's has_chat_template is set only when it is empty. A
	// Door without a template makes Chat fail with FAILED_PRECONDITION /
	// NO_CHAT_TEMPLATE.
	ChatFallback string
	// Info is what GetModelInfo reports besides the scheduler's limits;
	// Info.VocabSize defaults to Tokenizer.VocabSize().
	Info ModelInfo
	// AuthToken, when set, requires "authorization: Bearer <token>" on every
	// RPC except the health service.
	AuthToken string
	// TLS, when set, serves TLS with it.
	TLS *tls.Config
	// MaxRecvMsgSize caps a received message. Default 4 MiB.
	MaxRecvMsgSize int
	// KeepaliveMinTime is the shortest client keepalive ping interval
	// allowed; clients pinging faster are disconnected. Default 10s.
	KeepaliveMinTime time.Duration
	// Registry receives the server's Prometheus metrics; nil creates one
	// (MetricsHandler serves it). The Door's per-request metrics are in
	// the registry it was given (the same one, in weft serve).
	Registry *prometheus.Registry

	// onFinal, when set (tests), is called with every request's Final.
	onFinal func(id string, f *scheduler.Final)
}

func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("server: config: %s", fmt.Sprintf(format, args...))
	}
	if c.Scheduler == nil {
		return errors.New("server: config: nil Scheduler")
	}
	if c.Door == nil {
		return errors.New("server: config: nil Door")
	}
	if c.Tokenizer == nil {
		return errors.New("server: config: nil Tokenizer")
	}
	if c.Door.Limits() != c.Scheduler.Limits() {
		return errors.New("server: config: the Door was built with other limits than the Scheduler's")
	}
	if c.Info.VocabSize == 0 {
		c.Info.VocabSize = c.Tokenizer.VocabSize()
	}
	if c.Info.VocabSize <= 0 {
		return bad("vocabulary size %d must be > 0", c.Info.VocabSize)
	}
	// Without a vocabulary the scheduler would let any token id through
	// to the model.
	if lim := c.Scheduler.Limits(); lim.VocabSize <= 0 {
		return bad("the scheduler checks no token ids (scheduler.Config.VocabSize is %d)", lim.VocabSize)
	}
	if !c.Door.HasChat() && c.ChatFallback != "" {
		return bad("ChatFallback %q without a chat template", c.ChatFallback)
	}
	if c.MaxRecvMsgSize == 0 {
		c.MaxRecvMsgSize = 4 << 20
	}
	if c.MaxRecvMsgSize < 1024 {
		return bad("MaxRecvMsgSize %d must be >= 1024", c.MaxRecvMsgSize)
	}
	if c.KeepaliveMinTime == 0 {
		c.KeepaliveMinTime = 10 * time.Second
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	return nil
}
