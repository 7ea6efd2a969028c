// Package batch defines the contract between the step loop and a compute
// backend: one decoding step's ragged batch (SeqStep), the Backend that runs
// it and the shape of its paged KV pool (KVInfo).
//
// The types live here rather than in package runtime so that backends
// (runtime/llama, cuda) can implement Backend while package runtime bundles
// models and backends; package runtime re-exports every name as an alias
// (runtime.SeqStep is batch.SeqStep), so code may use either.
package batch

import (
	"context"

	"github.com/weft-inference/weft/runtime/sample"
)

// SeqStep is one sequence's share of a decoding step: a prompt chunk or a
// single decode token, with the KV blocks it reads and writes.
type SeqStep struct {
	// Seq identifies the sequence (the scheduler's id); it is only used for
	// errors and tracing.
	Seq uint64
	// Tokens are fed this step: a prompt chunk, or the one token sampled last step.
	Tokens []int32
	// Pos is the position of Tokens[0]: the number of tokens of this sequence
	// whose K/V are already in its blocks.
	Pos int
	// Blocks is the block table: Blocks[i] holds positions
	// [i*BlockSize, (i+1)*BlockSize). It covers at least Pos+len(Tokens) positions.
	Blocks []int32
	// Sampler, when non-nil, asks for a token to be sampled from the logits of
	// the last token of Tokens (the step that ends a prompt, or a decode step).
	// Nil for prompt chunks that do not end the prompt.
	Sampler *sample.Sampler
}

// Sampled is what a step returns for one SeqStep with a Sampler.
type Sampled = sample.Result

// Backend runs the model's forward pass on a ragged batch. It is the one wide
// interface of weft: the CPU backend (runtime/llama) and the CUDA backend
// (cuda/) implement it.
//
// Forward, as a plain loop:
//
//	for i, s := range seqs {
//		for j, tok := range s.Tokens {
//			pos := s.Pos + j
//			// run every layer for tok at pos, attending to positions [0, pos]
//			// of sequence s (read from s.Blocks), and store the K/V of pos in
//			// block s.Blocks[pos/BlockSize], slot pos%BlockSize.
//		}
//		if logits[i] != nil { logits[i] = output logits of s.Tokens[len-1] }
//	}
//
// but in one pass: the weights are read once per step for all tokens of all
// sequences.
type Backend interface {
	// Forward runs one step. logits has len(seqs) entries; a non-nil entry
	// (len VocabSize) receives the last token's logits of that sequence.
	Forward(ctx context.Context, seqs []SeqStep, logits [][]float32) error
	// KV describes the block pool this backend allocated.
	KV() KVInfo
	// Name is "cpu" or "cuda" plus detail for logs and GetModelInfo.
	Name() string
	// Close releases the backend's memory.
	Close() error
}

// KVInfo describes a backend's paged KV pool.
type KVInfo struct {
	// BlockSize is the number of token positions per block.
	BlockSize int
	// NumBlocks is the number of blocks in the pool.
	NumBlocks int
	// BytesPerBlock is the memory one block takes over all layers, K and V.
	BytesPerBlock int64
	// Type is the element type of the cache: "f16" or "f32".
	Type string
}
