package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/tokenizer"
	"github.com/weft-inference/weft/scheduler"
)

// Scheduler is what the server needs from the batching loop;
// *scheduler.Scheduler implements it.
type Scheduler interface {
	Submit(ctx context.Context, r scheduler.Request) (*scheduler.Stream, error)
	Stats() scheduler.Stats
	Drain()
}

var _ Scheduler = (*scheduler.Scheduler)(nil)

// Tokenizer turns text into token ids and back; *tokenizer.Tokenizer
// implements it.
type Tokenizer interface {
	Encode(text string, addSpecial, parseSpecial bool) []int32
	// EncodeSegments tokenizes the concatenated segments, recognising
	// control-token text only in segments with ParseSpecial set.
	EncodeSegments(segs []tokenizer.Segment, addSpecial bool) []int32
	Decode(ids []int32) string
	VocabSize() int
}

// PromptBytesPerToken is the default bytes-per-token bound behind
// MaxPromptBytes. Typical text runs 3 to 5 bytes per token (English on a
// 32k SentencePiece vocabulary about 4, CJK about 3 per character); 16 is
// four times that, so a prompt that fits the context in tokens is all but
// never refused for its bytes, while tokenizing the longest accepted text
// costs a bounded, context-sized amount of work and memory.
const PromptBytesPerToken = 16

// bosTokenizer is optionally implemented by a Tokenizer whose model wants a
// BOS token in front of every prompt (used for chat prompts whose template
// does not write one).
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

// KVCache describes the paged KV pool for GetModelInfo.
type KVCache struct {
	BlockSize     int    // token positions per block
	NumBlocks     int    // blocks in the pool
	BytesPerBlock int64  // bytes of one block over all layers, K and V
	Type          string // "f16" or "f32"
}

// ModelInfo describes the served model for GetModelInfo.
type ModelInfo struct {
	Name           string         // general.name or the file's base name
	Architecture   string         // "llama", ...
	ContextLen     int            // prompt plus generated tokens accepted
	VocabSize      int            // tokens in the vocabulary
	TensorTypes    map[string]int // tensor type -> number of tensors
	Backend        string         // "cpu ...", "cuda ..."
	KV             KVCache        // the KV pool
	BOS            int32          // BOS id or -1
	EOG            []int32        // end-of-generation ids
	ParameterCount int64          // parameters (0 if unknown)
}

// Config configures a Server. Scheduler, Tokenizer and Info.ContextLen are
// required; the rest has defaults.
type Config struct {
	// Scheduler runs the requests. Required.
	Scheduler Scheduler
	// Tokenizer tokenizes prompts. Required.
	Tokenizer Tokenizer
	// Chat renders chat conversations; nil makes Chat fail with
	// FAILED_PRECONDITION.
	Chat ChatRenderer
	// Info is what GetModelInfo reports; Info.ContextLen (> 1) bounds
	// prompts and max_tokens, Info.VocabSize defaults to Tokenizer.VocabSize().
	Info ModelInfo
	// MaxPromptBytes bounds the bytes of text a request may have tokenized
	// (Generate's text, the sum of a chat conversation's contents, Tokenize's
	// text); longer texts are refused with PROMPT_TOO_LONG before any
	// tokenization. Default Info.ContextLen * PromptBytesPerToken.
	MaxPromptBytes int
	// TokenizeConcurrency bounds how many requests tokenize at once (the
	// rest wait, cancellably). Default GOMAXPROCS.
	TokenizeConcurrency int
	// DefaultMaxTokens is used when a request leaves max_tokens at 0
	// (capped by the room left in the context). Default 256.
	DefaultMaxTokens int
	// SendStallTimeout cuts off a stream whose client has accepted nothing
	// for this long (one Send blocked). Default 30s.
	SendStallTimeout time.Duration
	// QueueTimeout, when > 0, fails requests not admitted in time.
	QueueTimeout time.Duration
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
	// Logger receives request logs. Default slog.Default().
	Logger *slog.Logger
	// MaxSeqs is the scheduler's batch size cap (scheduler.Config.MaxSeqs);
	// the ORCA application_utilization divides by it. Default 256, the
	// scheduler's default.
	MaxSeqs int
	// Registry receives the Prometheus metrics; nil creates one
	// (MetricsHandler serves it).
	Registry *prometheus.Registry

	// onFinal, when set (tests), is called with every request's Final.
	onFinal func(id string, f *scheduler.Final)
	// onCancel, when set (tests), is called when a request is abandoned
	// (its context ended or a Send failed) before its Final was sent.
	onCancel func(id string)
}

func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("server: config: %s", fmt.Sprintf(format, args...))
	}
	if c.Scheduler == nil {
		return errors.New("server: config: nil Scheduler")
	}
	if c.Tokenizer == nil {
		return errors.New("server: config: nil Tokenizer")
	}
	if c.Info.VocabSize == 0 {
		c.Info.VocabSize = c.Tokenizer.VocabSize()
	}
	if c.Info.VocabSize <= 0 {
		return bad("vocabulary size %d must be > 0", c.Info.VocabSize)
	}
	if c.Info.ContextLen < 2 {
		return bad("context length %d must be >= 2", c.Info.ContextLen)
	}
	if c.MaxPromptBytes == 0 {
		c.MaxPromptBytes = c.Info.ContextLen * PromptBytesPerToken
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
	if c.DefaultMaxTokens == 0 {
		c.DefaultMaxTokens = 256
	}
	if c.DefaultMaxTokens < 0 {
		return bad("DefaultMaxTokens %d must be > 0", c.DefaultMaxTokens)
	}
	if c.SendStallTimeout == 0 {
		c.SendStallTimeout = 30 * time.Second
	}
	if c.SendStallTimeout < 0 {
		return bad("SendStallTimeout %v must be > 0", c.SendStallTimeout)
	}
	if c.QueueTimeout < 0 {
		return bad("QueueTimeout %v must be >= 0", c.QueueTimeout)
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
	if c.MaxSeqs == 0 {
		c.MaxSeqs = 256
	}
	if c.MaxSeqs < 0 {
		return bad("MaxSeqs %d must be > 0", c.MaxSeqs)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	return nil
}
