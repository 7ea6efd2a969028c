package scheduler

import (
	"fmt"
	"unicode/utf8"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// Defaults of Config, and the bounds on a request's fields. These are the
// one place they are written: cmd's flag defaults, the server and the
// OpenAI door read them from here (or from Scheduler.Limits).
const (
	// DefaultMaxSeqs is Config.MaxSeqs's default.
	DefaultMaxSeqs = batch.DefaultMaxSeqs
	// DefaultMaxBatchTokens is Config.MaxBatchTokens's default (raised to
	// MaxSeqs when that is larger, so every running sequence can decode in
	// one step).
	DefaultMaxBatchTokens = batch.DefaultMaxBatchTokens
	// DefaultMaxWaiting is Config.MaxWaiting's default.
	DefaultMaxWaiting = 1024
	// DefaultMaxTokens is Config.DefaultMaxTokens's default: the
	// max_tokens a front door fills in when a client leaves it unset.
	DefaultMaxTokens = 256

	// MaxStopStrings bounds Request.StopStrings, and MaxStopStringBytes
	// each of them: every stop string is matched against the held-back
	// text after each token, so their number and length bound that work.
	MaxStopStrings     = 16
	MaxStopStringBytes = 256
	// MaxStopTokenIDs bounds Request.StopTokenIDs.
	MaxStopTokenIDs = 64
)

// Sentinels of particular limits; both wrap ErrInvalidRequest.
var (
	// ErrEmptyPrompt: a request without prompt tokens.
	ErrEmptyPrompt = fmt.Errorf("%w: empty prompt", ErrInvalidRequest)
	// ErrTokenOutOfRange: a token id outside the vocabulary (in the prompt
	// or the stop token ids).
	ErrTokenOutOfRange = fmt.Errorf("%w: token id outside the vocabulary", ErrInvalidRequest)
)

// Limits are the bounds Submit enforces, as configured: what a front door
// reports to clients (GetModelInfo) and consults before submitting (to
// fill defaults, or to truncate a conversation until it fits). Every value
// is the one Submit checks against.
type Limits struct {
	// ContextLen is the most tokens (prompt plus generated) one sequence
	// holds in the configured batching mode: Config.ContextLen after
	// validation, so in static mode the pool less the scratch blocks.
	// Generation ends with FinishLength when it is reached.
	ContextLen int
	// MaxPromptTokens is the longest prompt accepted: ContextLen-1, so at
	// least one token can be generated. Longer is ErrPromptTooLong.
	MaxPromptTokens int
	// MaxTokens is the largest Request.MaxTokens accepted (ContextLen);
	// generation still ends when the context is full.
	MaxTokens int
	// DefaultMaxTokens is what a front door puts in Request.MaxTokens when
	// the client leaves it unset, capped by the room the prompt leaves
	// (see MaxTokensFor).
	DefaultMaxTokens int
	// MaxStopStrings, MaxStopStringBytes and MaxStopTokenIDs bound the stop
	// conditions (a stop string is 1 to MaxStopStringBytes bytes).
	MaxStopStrings     int
	MaxStopStringBytes int
	MaxStopTokenIDs    int
	// MaxTopLogprobs bounds Sampling.TopLogprobs (sample.MaxTopLogprobs).
	MaxTopLogprobs int
	// VocabSize: prompt and stop token ids must be in [0, VocabSize), and
	// the sampling parameters are validated (sample.Params.Validate). 0
	// when Config.VocabSize is unset: then none of that is checked.
	VocabSize int
	// MaxSeqs is the most sequences in one batch, MaxWaiting the most
	// requests waiting for admission (beyond it: ErrQueueFull).
	MaxSeqs    int
	MaxWaiting int
	// EmbedDim is the length of the vector an embedding request
	// (Request.Embed) returns, the model's hidden size; 0 when this
	// scheduler serves no embeddings (Submit refuses them with
	// ErrNoEmbeddings, NoEmbeddings says why).
	EmbedDim     int
	NoEmbeddings string
	// MaxEmbedTokens is the longest input of an embedding request: the
	// whole context, as nothing is generated after it.
	MaxEmbedTokens int
	// Pooling is how an embedding request pools its tokens' hidden states
	// (Config.Pooling).
	Pooling batch.Pooling
}

// Limits returns the bounds Submit enforces.
func (s *Scheduler) Limits() Limits { return s.cfg.limits() }

func (c *Config) limits() Limits {
	return Limits{
		ContextLen:         c.ContextLen,
		MaxPromptTokens:    c.ContextLen - 1,
		MaxTokens:          c.ContextLen,
		DefaultMaxTokens:   c.DefaultMaxTokens,
		MaxStopStrings:     MaxStopStrings,
		MaxStopStringBytes: MaxStopStringBytes,
		MaxStopTokenIDs:    MaxStopTokenIDs,
		MaxTopLogprobs:     sample.MaxTopLogprobs,
		VocabSize:          c.VocabSize,
		MaxSeqs:            c.MaxSeqs,
		MaxWaiting:         c.MaxWaiting,
		EmbedDim:           c.embedDim,
		NoEmbeddings:       c.noEmbed,
		MaxEmbedTokens:     c.ContextLen,
		Pooling:            c.Pooling,
	}
}

// LimitError is a request field outside its bound. It wraps its sentinel
// (Err: ErrPromptTooLong, ErrEmptyPrompt, ErrTokenOutOfRange or
// ErrInvalidRequest), so
// errors.Is(err, ErrPromptTooLong) and friends hold.
type LimitError struct {
	// Field is the Request field, in snake_case: "prompt", "max_tokens",
	// "min_tokens", "stop", "stop_token_ids", "queue_timeout".
	Field string
	// Op is how Got must compare with Limit: "<=", ">=" or "<".
	Op string
	// Limit is the bound.
	Limit int
	// Got is the request's value (a length, a count, a token id).
	Got int
	// Err is the sentinel.
	Err error
	// What names Got when the field alone does not ("prompt tokens",
	// "stop string bytes", "token id").
	What string
}

func (e *LimitError) Error() string { return fmt.Sprintf("%v: %s: %s", e.Err, e.Field, e.Detail()) }

// Detail says what the value is and what it must be, without the sentinel
// or the field name (a front door puts its own field name in front).
func (e *LimitError) Detail() string {
	what := e.What
	if what == "" {
		what = e.Field
	}
	return fmt.Sprintf("%s %d, must be %s %d", what, e.Got, e.Op, e.Limit)
}

// Unwrap returns the sentinel.
func (e *LimitError) Unwrap() error { return e.Err }

// TextError is a text of a Request that is not valid UTF-8 (a stop
// string: it is matched against decoded text). It wraps
// ErrInvalidRequest.
type TextError struct {
	Field string // the Request field, in snake_case: "stop"
	Index int    // the string's index in the field
}

func (e *TextError) Error() string {
	return fmt.Sprintf("%v: %s %d is not valid UTF-8", ErrInvalidRequest, e.Field, e.Index)
}

// Unwrap returns ErrInvalidRequest.
func (e *TextError) Unwrap() error { return ErrInvalidRequest }

// CheckPrompt returns the error Submit gives a prompt of n tokens, or nil
// when it fits the context.
func (l Limits) CheckPrompt(n int) error {
	if n > l.MaxPromptTokens {
		return &LimitError{Field: "prompt", What: "prompt tokens", Op: "<=", Limit: l.MaxPromptTokens, Got: n, Err: ErrPromptTooLong}
	}
	return nil
}

// MaxTokensFor is the max_tokens a request with a prompt of promptLen
// tokens gets when its client leaves it unset: DefaultMaxTokens, or the
// room left in the context when that is less.
func (l Limits) MaxTokensFor(promptLen int) int {
	return max(1, min(l.DefaultMaxTokens, l.ContextLen-promptLen))
}

// check validates r against l, in the order a client fixes things: the
// prompt, the lengths, the sampling parameters, the stop conditions. An
// embedding request has its prompt checked alone (up to MaxEmbedTokens):
// it generates nothing, so the other fields are not read.
func (l Limits) check(r Request) error {
	if r.Embed && l.EmbedDim == 0 {
		return fmt.Errorf("%w: %s", ErrNoEmbeddings, l.NoEmbeddings)
	}
	if len(r.Prompt) == 0 {
		return &LimitError{Field: "prompt", What: "prompt tokens", Op: ">=", Limit: 1, Got: 0, Err: ErrEmptyPrompt}
	}
	if l.VocabSize > 0 {
		for _, t := range r.Prompt {
			if t < 0 || int(t) >= l.VocabSize {
				return &LimitError{Field: "prompt", What: "token id", Op: "<", Limit: l.VocabSize, Got: int(t), Err: ErrTokenOutOfRange}
			}
		}
	}
	if r.Embed {
		if len(r.Prompt) > l.MaxEmbedTokens {
			return &LimitError{Field: "prompt", What: "prompt tokens", Op: "<=", Limit: l.MaxEmbedTokens, Got: len(r.Prompt), Err: ErrPromptTooLong}
		}
		if r.QueueTimeout < 0 {
			return fmt.Errorf("%w: queue timeout %v must be >= 0", ErrInvalidRequest, r.QueueTimeout)
		}
		return nil
	}
	if err := l.CheckPrompt(len(r.Prompt)); err != nil {
		return err
	}
	switch {
	case r.MaxTokens < 1:
		return &LimitError{Field: "max_tokens", Op: ">=", Limit: 1, Got: r.MaxTokens, Err: ErrInvalidRequest}
	case r.MaxTokens > l.MaxTokens:
		return &LimitError{Field: "max_tokens", Op: "<=", Limit: l.MaxTokens, Got: r.MaxTokens, Err: ErrInvalidRequest}
	case r.MinTokens < 0:
		return &LimitError{Field: "min_tokens", Op: ">=", Limit: 0, Got: r.MinTokens, Err: ErrInvalidRequest}
	case r.MinTokens > r.MaxTokens:
		return &LimitError{Field: "min_tokens", What: "min_tokens (bounded by max_tokens)", Op: "<=", Limit: r.MaxTokens, Got: r.MinTokens, Err: ErrInvalidRequest}
	case r.QueueTimeout < 0:
		return fmt.Errorf("%w: queue timeout %v must be >= 0", ErrInvalidRequest, r.QueueTimeout)
	}
	if l.VocabSize > 0 {
		if err := r.Sampling.Validate(l.VocabSize); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
	}
	if len(r.StopStrings) > l.MaxStopStrings {
		return &LimitError{Field: "stop", What: "stop strings", Op: "<=", Limit: l.MaxStopStrings, Got: len(r.StopStrings), Err: ErrInvalidRequest}
	}
	for i, x := range r.StopStrings {
		if !utf8.ValidString(x) {
			return &TextError{Field: "stop", Index: i}
		}
		if x == "" {
			return &LimitError{Field: "stop", What: "stop string bytes", Op: ">=", Limit: 1, Got: 0, Err: ErrInvalidRequest}
		}
		if len(x) > l.MaxStopStringBytes {
			return &LimitError{Field: "stop", What: "stop string bytes", Op: "<=", Limit: l.MaxStopStringBytes, Got: len(x), Err: ErrInvalidRequest}
		}
	}
	if len(r.StopTokenIDs) > l.MaxStopTokenIDs {
		return &LimitError{Field: "stop_token_ids", What: "stop token ids", Op: "<=", Limit: l.MaxStopTokenIDs, Got: len(r.StopTokenIDs), Err: ErrInvalidRequest}
	}
	if l.VocabSize > 0 {
		for _, t := range r.StopTokenIDs {
			if t < 0 || int(t) >= l.VocabSize {
				return &LimitError{Field: "stop_token_ids", What: "token id", Op: "<", Limit: l.VocabSize, Got: int(t), Err: ErrTokenOutOfRange}
			}
		}
	}
	return nil
}

// BatchShape fills the defaults of a step's shape: maxSeqs 0 means
// DefaultMaxSeqs, maxBatchTokens 0 means DefaultMaxBatchTokens or maxSeqs
// if larger (every running sequence can decode in one step). Negative
// values are returned unchanged for the caller's validation to refuse.
// Config.validate applies it, and a backend that sizes its step buffers is
// given the same result.
func BatchShape(maxSeqs, maxBatchTokens int) (int, int) {
	if maxSeqs == 0 {
		maxSeqs = DefaultMaxSeqs
	}
	if maxBatchTokens == 0 {
		maxBatchTokens = max(DefaultMaxBatchTokens, maxSeqs)
	}
	return maxSeqs, maxBatchTokens
}
