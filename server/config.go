package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
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
	// Limits are the bounds Submit enforces: the server reports them
	// (GetModelInfo) and fills defaults from them, and checks none itself.
	Limits() scheduler.Limits
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
	VocabSize      int            // tokens in the vocabulary
	TensorTypes    map[string]int // tensor type -> number of tensors
	Backend        string         // "cpu ...", "cuda ..."
	KV             KVCache        // the KV pool
	BOS            int32          // BOS id or -1
	EOG            []int32        // end-of-generation ids
	ParameterCount int64          // parameters (0 if unknown)
}

// Config configures a Server. Scheduler and Tokenizer are required; the
// rest has defaults.
type Config struct {
	// Scheduler runs the requests. Required.
	Scheduler Scheduler
	// Tokenizer tokenizes prompts. Required. One that also has BOS() int32
	// and AddBOS() bool gets a BOS in front of chat prompts whose template
	// writes none.
	Tokenizer Tokenizer
	// Chat renders chat conversations: the model's own template, or the
	// fallback the operator chose (then ChatFallback names it). Nil makes
	// Chat fail with FAILED_PRECONDITION / NO_CHAT_TEMPLATE.
	Chat ChatRenderer
	// ChatFallback is empty when Chat is the model's own template, else the
	// name of the fallback it is ("chatml", a file); GetModelInfo's
	// has_chat_template is set only when it is empty.
	ChatFallback string
	// Info is what GetModelInfo reports besides the scheduler's limits;
	// Info.VocabSize defaults to Tokenizer.VocabSize().
	Info ModelInfo
	// MaxPromptBytes bounds the bytes of text a request may have tokenized
	// (Generate's text, the sum of a chat conversation's contents, Tokenize's
	// text); longer texts are refused with PROMPT_TOO_LONG before any
	// tokenization. Default the context length (Scheduler.Limits) times
	// frontdoor.PromptBytesPerToken.
	MaxPromptBytes int
	// TokenizeConcurrency bounds how many requests tokenize at once (the
	// rest wait, cancellably). Default GOMAXPROCS.
	TokenizeConcurrency int
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
	// Without a vocabulary the scheduler would let any token id through
	// to the model.
	if lim := c.Scheduler.Limits(); lim.VocabSize <= 0 {
		return bad("the scheduler checks no token ids (scheduler.Config.VocabSize is %d)", lim.VocabSize)
	}
	if c.Chat == nil && c.ChatFallback != "" {
		return bad("ChatFallback %q without Chat", c.ChatFallback)
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
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	return nil
}
