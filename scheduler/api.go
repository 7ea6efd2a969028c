package scheduler

import (
	"time"

	"github.com/weft-inference/weft/runtime/sample"
)

// This file is the contract between the scheduler and its callers (server,
// bench, cmd). The implementation lives beside it.

// Request is one generation request as the server hands it in. Token ids only:
// the server tokenizes (and renders chat templates) before submitting.
type Request struct {
	// ID is the client's request id (for logs); may be empty.
	ID string
	// Prompt holds the prompt's token ids (BOS included when the model adds it). Not empty.
	Prompt []int32
	// Sampling holds the sampling parameters, seed and logprob options.
	Sampling sample.Params
	// MaxTokens caps generated tokens: 1 to Limits.MaxTokens (a front door
	// fills Limits.MaxTokensFor when its client leaves it unset).
	MaxTokens int
	// MinTokens suppresses EOS and stop conditions until this many tokens exist.
	MinTokens int
	// StopStrings end generation when the generated text contains one; the
	// stop string itself is not emitted unless IncludeStopString.
	StopStrings []string
	// IncludeStopString emits the matched stop string as part of the text.
	IncludeStopString bool
	// StopTokenIDs end generation when one is sampled (the token is not emitted as text).
	StopTokenIDs []int32
	// IgnoreEOS keeps generating past end-of-generation tokens.
	IgnoreEOS bool
	// Priority: higher runs first; FCFS within a priority.
	Priority int
	// QueueTimeout, when > 0, fails the request if it has not been admitted in time.
	QueueTimeout time.Duration
	// Embed makes this an embedding request: the prompt (up to
	// Limits.MaxEmbedTokens) is prefilled through the same steps as any
	// other, its tokens' hidden states pooled (Config.Pooling) as they
	// are computed, and the request ends with FinishEmbedded and the
	// L2-normalized vector in Final.Embedding, nothing sampled; its KV
	// blocks go back at once and never enter the prefix cache. Only
	// Prompt, ID, Priority and QueueTimeout are read.
	Embed bool
}

// FinishReason says why a request ended.
type FinishReason int

const (
	FinishNone         FinishReason = iota // not finished
	FinishEOS                              // model produced an end-of-generation token
	FinishLength                           // MaxTokens reached (or the context is full)
	FinishStopSequence                     // a stop string or stop token id matched
	FinishCancelled                        // the client cancelled or went away
	FinishError                            // failed; Final.Err says why
	FinishTimeout                          // QueueTimeout passed while waiting
	FinishEmbedded                         // an embedding request's prompt was pooled: Final.Embedding
)

// Token is one generated token as streamed.
type Token struct {
	ID      int32
	Logprob float32
	Top     []sample.TokenLogprob
}

// Event is what a stream's mailbox yields: tokens produced since the last
// event (several may be batched together when the reader was slow), their
// text delta, and, on the last event, Final.
type Event struct {
	Tokens []Token
	// Text is the UTF-8-safe text delta; text that may still turn into a stop
	// string is held back until it cannot.
	Text  string
	Final *Final
}

// Final closes a stream.
type Final struct {
	Reason           FinishReason
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int           // prompt tokens served from the prefix cache
	QueueWait        time.Duration // submit to first admission
	TTFT             time.Duration // submit to first token
	Err              error         // set with FinishError
	// StopMatched is the stop string or id text that ended the stream, if any.
	StopMatched string
	// DraftTokens and AcceptedTokens count the tokens drafted for this
	// sequence and the ones verification accepted (speculative decoding;
	// both 0 without it).
	DraftTokens    int
	AcceptedTokens int
	// Embedding is an embedding request's vector (FinishEmbedded):
	// Limits.EmbedDim values of unit L2 norm.
	Embedding []float32
}

// Stats is an introspection snapshot of the scheduler after a step.
type Stats struct {
	Steps          uint64
	Running        int
	Waiting        int
	KVBlocksTotal  int // blocks in the ledger: Used + Cached + Free
	KVBlocksUsed   int // held by running sequences
	KVBlocksCached int // free but holding a reusable prefix
	KVBlocksFree   int
	// KVBlocksReserved are pool blocks kept outside the ledger (static
	// mode's scratch blocks for padding rows); not counted in KVBlocksTotal.
	KVBlocksReserved int
	Preemptions      uint64
	LastBatchTokens  int
	LastPrefillTok   int
	LastDecodeTok    int
	PromptTokens     uint64 // totals since start
	GenerationTokens uint64
	// PaddingTokens counts the padding tokens static mode computed: decode
	// rows of group members that had already ended, and prompt padding up
	// to the group's longest prompt (total since start; not included in
	// GenerationTokens or PromptTokens). LastPaddingTok is the last step's
	// share, also included in LastBatchTokens.
	PaddingTokens  uint64
	LastPaddingTok int
	// AdmissionPaused is set while Config.Capacity refuses new blocks;
	// AdmissionPausedReason is what it said.
	AdmissionPaused       bool
	AdmissionPausedReason string
	// Draining is set once Drain was called.
	Draining bool
	// SpecDraftTokens and SpecAcceptedTokens are the tokens drafted and
	// the drafts accepted by verification (speculative decoding), totals
	// since start; drafted tokens are in LastBatchTokens and
	// LastDecodeTok as model work, accepted ones in GenerationTokens.
	SpecDraftTokens    uint64
	SpecAcceptedTokens uint64
}

// The implementation (scheduler.go and friends) provides, exactly:
//
//	// Model runs one step of the batch and samples: samplers[i] is non-nil
//	// exactly when seqs[i].Logits, and results[i] is valid then.
//	// runtime.Engine implements it.
//	type Model interface {
//		Step(ctx context.Context, seqs []batch.SeqStep, samplers []*sample.Sampler) ([]sample.Result, error)
//	}
//	// TextDecoder turns generated ids into UTF-8 text incrementally
//	// (*tokenizer.StreamDecoder implements it).
//	type TextDecoder interface { Add(id int32) string; Flush() string }
//
//	func New(cfg Config, m Model) (*Scheduler, error)   // Config holds the KV pool
//	    // shape (BlockSize, NumBlocks), MaxSeqs, MaxBatchTokens, MaxWaiting, ContextLen,
//	    // Batching (continuous|static), BatchSize, NewDecoder func() TextDecoder,
//	    // IsEOG func(int32) bool, Capacity (optional admission gate) ...
//	func (s *Scheduler) Run(ctx context.Context) error   // the loop; returns when ctx ends
//	func (s *Scheduler) Submit(ctx context.Context, r Request) (*Stream, error)
//	    // ctx is the request's: when it ends the sequence is cancelled and leaves the
//	    // batch at the next step. Errors (wrapped sentinels): ErrInvalidRequest,
//	    // ErrPromptTooLong, ErrTokenOutOfRange (as *LimitError: field, bound, value;
//	    // sampling ranges as *sample.ParamError), ErrNoEmbeddings, ErrQueueFull
//	    // (at submit time), ErrDraining, ErrClosed.
//	func (s *Scheduler) Limits() Limits // the bounds Submit enforces (context, lengths, stops)
//	func (st *Stream) Recv(ctx context.Context) (Event, error)
//	    // blocks until at least one event is pending (merging all pending ones into one
//	    // Event); after the event carrying Final it returns io.EOF.
//	func (st *Stream) Cancel()
//	func (s *Scheduler) Stats() Stats   // snapshot, safe from any goroutine
//	func (s *Scheduler) Drain()         // stop admitting; in-flight ones go on
