package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// Model runs one step of the batch and samples: samplers[i] is non-nil
// exactly when seqs[i].Logits, and results[i] is valid then. A
// batch.StepErrors fails only the sequences it lists. runtime.Engine
// implements it.
type Model interface {
	Step(ctx context.Context, seqs []batch.SeqStep, samplers []*sample.Sampler) ([]sample.Result, error)
}

// Verifier is a Model that verifies drafted tokens (speculative decoding;
// runtime.Engine implements it). StepDrafts is Step for a batch whose rows
// may carry drafts (batch.SeqStep.Draft): out[i] lists row i's tokens, the
// accepted drafts then the token sampled after them (one token for a row
// without drafts), each sampled as if decoded alone; out is valid until the
// next step. VerifiesDrafts says whether the backend computes the logits of
// drafted tokens; the scheduler drafts only when it does.
type Verifier interface {
	Model
	StepDrafts(ctx context.Context, seqs []batch.SeqStep, samplers []*sample.Sampler) ([][]sample.Result, error)
	VerifiesDrafts() bool
}

// TextDecoder turns generated ids into UTF-8 text incrementally
// (*tokenizer.StreamDecoder implements it).
type TextDecoder interface {
	Add(id int32) string
	Flush() string
}

// Capacity is an optional admission gate (a GPU memory tracker, say). The
// scheduler asks it before admitting a request that needs new KV blocks;
// when it says no, admission pauses (requests wait, none fail) and Stats
// reports the reason.
type Capacity interface {
	AdmitOK() (ok bool, reason string)
}

// Batching modes.
const (
	// BatchingContinuous merges every in-flight sequence into one ragged
	// batch per step; sequences join and leave at any step.
	BatchingContinuous = "continuous"
	// BatchingStatic runs fixed groups of up to BatchSize requests that
	// start together and end together (the baseline for benchmarks).
	BatchingStatic = "static"
)

// Sentinel errors. Submit wraps them with %w; the server maps them to gRPC
// status codes.
var (
	ErrInvalidRequest = errors.New("scheduler: invalid request")
	ErrPromptTooLong  = errors.New("scheduler: prompt too long")
	ErrQueueFull      = errors.New("scheduler: waiting queue full")
	ErrDraining       = errors.New("scheduler: draining, not accepting requests")
	ErrClosed         = errors.New("scheduler: closed")
	// ErrNoEmbeddings refuses an embedding request (Request.Embed) this
	// scheduler cannot serve: its model's backend produces no hidden
	// states, or the batching is static. The error says which.
	ErrNoEmbeddings = errors.New("scheduler: embeddings not served")
)

// DefaultPooling is Config.Pooling's default: the last token's hidden
// state, the one token that, under causal attention, has seen the whole
// input.
const DefaultPooling = batch.PoolLast

// Config configures a Scheduler. Zero values take the defaults noted.
type Config struct {
	// BlockSize is the number of token positions per KV block
	// (batch.KVInfo.BlockSize). Required.
	BlockSize int
	// NumBlocks is the number of blocks in the KV pool
	// (batch.KVInfo.NumBlocks). Required.
	NumBlocks int
	// KVWindows is the pool's layer groups (batch.KVInfo.Windows): nil
	// when one block table serves every layer; else the sliding window of
	// each group (0: the whole context). A sequence then holds one block
	// table per group, takes a block of every group for each new row of
	// positions, and gives a window group's blocks back as they slide out
	// of its window (tables.go). Continuous batching only.
	KVWindows []int
	// MaxSeqs caps the number of sequences in one batch (running
	// sequences). Default DefaultMaxSeqs.
	MaxSeqs int
	// MaxBatchTokens caps the tokens fed in one step (decode tokens plus
	// prompt chunks). Default DefaultMaxBatchTokens, or MaxSeqs when
	// that is larger.
	MaxBatchTokens int
	// MaxWaiting caps the requests submitted but not yet admitted; Submit
	// fails with ErrQueueFull beyond it. Default DefaultMaxWaiting.
	MaxWaiting int
	// ContextLen is the model's context length: a sequence ends with
	// FinishLength when prompt+generated reaches it. Default (and upper
	// bound) the most one sequence can hold: NumBlocks*BlockSize, less the
	// static mode's scratch blocks (BatchSize-1 of them); with KVWindows,
	// the longest sequence whose blocks (batch.SeqBlocks) fit the pool.
	ContextLen int
	// Batching is BatchingContinuous (default) or BatchingStatic.
	Batching string
	// BatchSize is the group size in static mode. Default (and upper
	// bound) min(MaxSeqs, MaxBatchTokens). Static mode reserves BatchSize-1
	// KV blocks as scratch for padding rows (see the package doc), so
	// BatchSize-1 must be below NumBlocks.
	BatchSize int
	// WatermarkBlocks are kept free when admitting a request while others
	// run, so running sequences can still grow. Default NumBlocks/100, at
	// least 1.
	WatermarkBlocks int
	// NewDecoder makes one TextDecoder per sequence. Nil: no text is
	// produced (token ids only) and stop strings never match.
	NewDecoder func() TextDecoder
	// IsEOG reports end-of-generation tokens. Nil: none.
	IsEOG func(int32) bool
	// VocabSize, when > 0, lets Submit check token ids and validate
	// sampling parameters, and lets MinTokens suppress the IsEOG tokens in
	// sampling.
	VocabSize int
	// DefaultMaxTokens is the max_tokens front doors fill in for a client
	// that leaves it unset (Limits.MaxTokensFor). Default DefaultMaxTokens.
	DefaultMaxTokens int
	// Capacity is an optional admission gate.
	Capacity Capacity
	// CapacityRetry is how long the idle loop waits before asking a
	// Capacity that said no again. Default 20ms.
	CapacityRetry time.Duration
	// DisablePrefixCache turns off reuse of cached prompt prefixes.
	DisablePrefixCache bool
	// Spec configures speculative decoding (spec.go); the zero value is
	// off.
	Spec SpecConfig
	// Pooling is how an embedding request (Request.Embed) pools the hidden
	// states of its tokens into its vector. Default DefaultPooling.
	Pooling batch.Pooling

	// embedDim is the model's hidden size when it produces hidden states
	// and the batching is continuous (New sets it), else 0; noEmbed then
	// says why.
	embedDim int
	noEmbed  string
}

// Speculative decoding's draft sources (SpecConfig.Source).
const (
	// SpecOff drafts nothing: one token per decoding sequence and step.
	SpecOff = "off"
	// SpecNgram drafts by prompt lookup: the continuation of the latest
	// earlier occurrence of the sequence's last n tokens in its own prompt
	// and output (no second model).
	SpecNgram = "ngram"
	// SpecDraft drafts with a second model that shares the target's
	// vocabulary (SpecConfig.Drafter, runtime.DraftModel): its greedy
	// continuation of the sequence.
	SpecDraft = "draft"
)

// Drafter proposes drafts for SpecDraft. The step loop calls Draft once per
// step with every sequence that speculates in it, and Forget when a
// sequence no longer runs (finished, cancelled, preempted: its history is
// fed again when it runs again), so the drafter can drop what it keeps for
// it. runtime.DraftModel implements it.
type Drafter interface {
	// Draft appends to each request's Out at most Max tokens proposed to
	// follow its History. An error drafts nothing this step; it fails
	// no sequence.
	Draft(ctx context.Context, reqs []batch.DraftRequest) error
	// Forget drops what the drafter keeps for sequence seq.
	Forget(seq uint64)
}

// SpecConfig configures speculative decoding. The Model must implement
// Verifier and report VerifiesDrafts; continuous batching only.
type SpecConfig struct {
	// Source is SpecOff ("" means off), SpecNgram or SpecDraft.
	Source string
	// Drafter makes the drafts of SpecDraft (required then, unused
	// otherwise).
	Drafter Drafter
	// MaxDraft caps the tokens drafted for one sequence in one step; each
	// sequence's own draft length adapts below it to its recent
	// acceptance. Default DefaultSpecMaxDraft.
	MaxDraft int
	// NgramMax and NgramMin are the n-gram lengths SpecNgram matches,
	// longest first. Defaults DefaultSpecNgramMax and 1.
	NgramMax, NgramMin int
	// MaxStepTokens: drafts are added to a step only while its tokens
	// (decode tokens, prompt chunks, drafts so far) stay at or below it,
	// so a step that is already compute-bound never speculates: a drafted
	// token costs nearly nothing only while the step is bound by reading
	// the weights. Where that stops depends on the machine, the backend
	// and the weight type; measure it (weft bench with and without
	// --spec at rising concurrency) and set it. Default
	// DefaultSpecMaxStepTokens.
	MaxStepTokens int
	// PauseSteps is how many decode steps a sequence stops drafting after
	// its drafts were rejected outright several times in a row. Default
	// DefaultSpecPauseSteps.
	PauseSteps int
}

// Defaults of SpecConfig.
const (
	DefaultSpecMaxDraft      = 8
	DefaultSpecNgramMax      = 3
	DefaultSpecMaxStepTokens = 16
	DefaultSpecPauseSteps    = 16
)

func (c *SpecConfig) validate(batching string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("scheduler: config: Spec: %s", fmt.Sprintf(format, args...))
	}
	switch c.Source {
	case "":
		c.Source = SpecOff
	case SpecOff, SpecNgram, SpecDraft:
	default:
		return bad("Source %q must be %q, %q or %q", c.Source, SpecOff, SpecNgram, SpecDraft)
	}
	if (c.Source == SpecDraft) != (c.Drafter != nil) {
		return bad("Source %q with Drafter set %v: a Drafter goes with %q alone", c.Source, c.Drafter != nil, SpecDraft)
	}
	if c.Source != SpecOff && batching != BatchingContinuous {
		return bad("speculative decoding needs %q batching, not %q", BatchingContinuous, batching)
	}
	if c.MaxDraft == 0 {
		c.MaxDraft = DefaultSpecMaxDraft
	}
	if c.NgramMax == 0 {
		c.NgramMax = DefaultSpecNgramMax
	}
	if c.NgramMin == 0 {
		c.NgramMin = 1
	}
	if c.MaxStepTokens == 0 {
		c.MaxStepTokens = DefaultSpecMaxStepTokens
	}
	if c.PauseSteps == 0 {
		c.PauseSteps = DefaultSpecPauseSteps
	}
	switch {
	case c.MaxDraft < 0 || c.MaxDraft > 64:
		return bad("MaxDraft %d must be in [1, 64]", c.MaxDraft)
	case c.NgramMin < 1 || c.NgramMax < c.NgramMin || c.NgramMax > 64:
		return bad("n-gram lengths [%d, %d] must satisfy 1 <= NgramMin <= NgramMax <= 64", c.NgramMin, c.NgramMax)
	case c.MaxStepTokens < 0:
		return bad("MaxStepTokens %d must be > 0", c.MaxStepTokens)
	case c.PauseSteps < 0:
		return bad("PauseSteps %d must be > 0", c.PauseSteps)
	}
	return nil
}

// on reports whether drafts are made.
func (c *SpecConfig) on() bool { return c.Source != "" && c.Source != SpecOff }

func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("scheduler: config: %s", fmt.Sprintf(format, args...))
	}
	if c.BlockSize <= 0 {
		return bad("BlockSize %d must be > 0", c.BlockSize)
	}
	if c.NumBlocks <= 0 {
		return bad("NumBlocks %d must be > 0", c.NumBlocks)
	}
	if c.MaxSeqs < 0 {
		return bad("MaxSeqs %d must be > 0", c.MaxSeqs)
	}
	c.MaxSeqs, c.MaxBatchTokens = BatchShape(c.MaxSeqs, c.MaxBatchTokens)
	if c.MaxBatchTokens < 0 {
		return bad("MaxBatchTokens %d must be > 0", c.MaxBatchTokens)
	}
	if c.MaxWaiting == 0 {
		c.MaxWaiting = DefaultMaxWaiting
	}
	if c.MaxWaiting < 0 {
		return bad("MaxWaiting %d must be > 0", c.MaxWaiting)
	}
	switch c.Batching {
	case "":
		c.Batching = BatchingContinuous
	case BatchingContinuous, BatchingStatic:
	default:
		return bad("Batching %q must be %q or %q", c.Batching, BatchingContinuous, BatchingStatic)
	}
	if c.BatchSize == 0 {
		c.BatchSize = min(c.MaxSeqs, c.MaxBatchTokens)
	}
	if c.BatchSize < 0 || c.BatchSize > c.MaxSeqs || c.BatchSize > c.MaxBatchTokens {
		return bad("BatchSize %d must be in [1, min(MaxSeqs, MaxBatchTokens)]", c.BatchSize)
	}
	if c.scratchBlocks() >= c.NumBlocks {
		return bad("static BatchSize %d reserves %d scratch blocks for padding rows, NumBlocks is only %d",
			c.BatchSize, c.scratchBlocks(), c.NumBlocks)
	}
	if c.KVWindows != nil {
		if c.Batching != BatchingContinuous {
			return bad("KVWindows (sliding-window layer groups) need %q batching, not %q", BatchingContinuous, c.Batching)
		}
		if len(c.KVWindows) == 0 {
			return bad("KVWindows is empty (nil means one group)")
		}
		for _, w := range c.KVWindows {
			if w < 0 {
				return bad("KVWindows %v: a window must be >= 0", c.KVWindows)
			}
		}
	}
	pool := c.poolContext()
	if c.ContextLen == 0 || c.ContextLen > pool {
		c.ContextLen = pool
	}
	if c.ContextLen < 2 {
		return bad("ContextLen %d must be >= 2", c.ContextLen)
	}
	if c.DefaultMaxTokens == 0 {
		c.DefaultMaxTokens = DefaultMaxTokens
	}
	if c.DefaultMaxTokens < 0 {
		return bad("DefaultMaxTokens %d must be > 0", c.DefaultMaxTokens)
	}
	if c.WatermarkBlocks == 0 {
		c.WatermarkBlocks = max(1, c.NumBlocks/100)
	}
	if c.WatermarkBlocks < 0 || c.WatermarkBlocks >= c.NumBlocks {
		return bad("WatermarkBlocks %d must be in [0, NumBlocks)", c.WatermarkBlocks)
	}
	if c.CapacityRetry <= 0 {
		c.CapacityRetry = 20 * time.Millisecond
	}
	if c.Pooling == batch.PoolingUnset {
		c.Pooling = DefaultPooling
	}
	if _, err := batch.ParsePooling(c.Pooling.String()); err != nil {
		return bad("Pooling %v must be mean, last or cls", c.Pooling)
	}
	return c.Spec.validate(c.Batching)
}

// scratchBlocks is the number of KV blocks static mode keeps out of the
// ledger for padding rows: one per batch row that can be padding while the
// group runs (BatchSize-1: the last member to finish ends the group).
func (c *Config) scratchBlocks() int {
	if c.Batching != BatchingStatic {
		return 0
	}
	return max(c.BatchSize-1, 0)
}

// poolContext is the longest sequence the ledger's blocks hold (in whole
// blocks): the largest n with batch.SeqBlocks(KVWindows, BlockSize, n) at
// most ledgerBlocks. When only window groups hold K/V, that does not grow
// with n, and the ledger's positions bound it as without windows.
func (c *Config) poolContext() int {
	blocks, bs := c.ledgerBlocks(), c.BlockSize
	if batch.SeqBlocks(c.KVWindows, bs, (blocks+1)*bs) <= blocks {
		return blocks * bs
	}
	lo, hi := 0, blocks // SeqBlocks fits lo rows, not hi+1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if batch.SeqBlocks(c.KVWindows, bs, mid*bs) <= blocks {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo * bs
}

// ledgerBlocks is the number of KV blocks the ledger hands out: the pool
// less the scratch blocks, which are the highest-numbered ones.
func (c *Config) ledgerBlocks() int { return c.NumBlocks - c.scratchBlocks() }
