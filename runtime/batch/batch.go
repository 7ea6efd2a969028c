package batch

import "context"

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
	// It serves every layer of a pool with one group (KVInfo.Windows nil).
	Blocks []int32
	// Tables are the block tables of a pool laid out in layer groups
	// (KVInfo.Windows not nil; Blocks is then unused): Tables[g] is group
	// g's, indexed like Blocks and covering Pos+len(Tokens) positions. In
	// a group with window w, the entries of rows below
	// FirstRow(w, BlockSize, Pos) are never read (their blocks may have
	// gone back to the pool; -1 marks them).
	Tables [][]int32
	// Logits is true when the step must produce the logits of the last token
	// of Tokens (the step that ends a prompt, or a decode step), so that the
	// next token can be sampled from them. False for prompt chunks that do
	// not end the prompt.
	Logits bool
	// Draft is the number of drafted tokens at the end of Tokens
	// (speculative decoding): tokens proposed for the sequence, not yet
	// verified. With Draft = k > 0 (Logits must be set, and k < len(Tokens))
	// the step produces the logits of each of the last k+1 tokens, so the
	// caller can check every draft against the model's own choice and sample
	// the token after the last accepted one. Only a Backend whose
	// DraftLogits reports true accepts Draft > 0.
	Draft int
	// Hidden, when non-nil, receives the final hidden state of every token
	// of Tokens: row j (Hidden[j*W:(j+1)*W], W the model's width) is the
	// output norm applied to the last layer's output for Tokens[j], the
	// vector the LM head would multiply. len(Hidden) must be
	// len(Tokens)*W. An embedding request's prefill sets it (with Logits
	// false, so the LM head is skipped for the row). Only a Backend that
	// implements HiddenStates with a non-zero HiddenSize accepts it.
	Hidden []float32
}

// HiddenStates is implemented by a Backend that honours SeqStep.Hidden.
type HiddenStates interface {
	// HiddenSize is the length of one token's hidden state (the model's
	// width), or 0 when the backend does not produce them.
	HiddenSize() int
}

// DraftLogits is implemented by a Backend that honours SeqStep.Draft. A
// Backend without it, or whose DraftLogits is false, refuses rows with
// Draft > 0, and callers must not speculate on it.
type DraftLogits interface {
	DraftLogits() bool
}

// LogitRows is the number of logit rows the step produces for s: 0 without
// Logits, else Draft+1. A Backend's logits slot for s holds that many rows
// of VocabSize values.
func LogitRows(s SeqStep) int {
	if !s.Logits {
		return 0
	}
	return s.Draft + 1
}

// Backend runs the model's forward pass on a ragged batch. It is the one wide
// interface of weft: the CPU backend (runtime/cpu) and the CUDA backend
// (cuda/) implement it.
//
// Forward, as a plain loop:
//
//	for i, s := range seqs {
//		for j, tok := range s.Tokens {
//			pos := s.Pos + j
//			// run every layer for tok at pos, attending to positions [0, pos]
//			// of sequence s (a layer with window w: [pos-w+1, pos]) read
//			// from s.Blocks, and store the K/V of pos in block
//			// s.Blocks[pos/BlockSize], slot pos%BlockSize. (With layer
//			// groups: layer li reads and writes s.Tables[Group[li]].)
//		}
//		if s.Hidden != nil {
//			for j := range s.Tokens {
//				s.Hidden[j*W:(j+1)*W] = outputNorm(last layer's output of s.Tokens[j])
//			}
//		}
//		if logits[i] != nil {
//			for r := range s.Draft + 1 { // row r: token len-1-Draft+r
//				logits[i][r*V:(r+1)*V] = output logits of s.Tokens[len(s.Tokens)-1-s.Draft+r]
//			}
//		}
//	}
//
// but in one pass: the weights are read once per step for all tokens of all
// sequences.
type Backend interface {
	// Forward runs one step. logits has len(seqs) entries; a non-nil entry
	// (len LogitRows(s)*VocabSize) receives the logits of the last
	// LogitRows(s) tokens of that sequence, the last token's last (just the
	// last token's, VocabSize values, when Draft is 0).
	// The slots decide what is computed: runtime.Engine gives one exactly to
	// the sequences with Logits set.
	Forward(ctx context.Context, seqs []SeqStep, logits [][]float32) error
	// KV describes the block pool this backend allocated.
	KV() KVInfo
	// Name is "cpu" or "cuda" plus detail for logs and GetModelInfo.
	Name() string
	// Close releases the backend's memory.
	Close() error
}

// DefaultBlockSize is the number of token positions per KV block that
// every backend uses unless told otherwise: 16, a multiple of the
// attention kernels' tile and small enough that a prefix-cache hit or a
// preemption loses at most 15 positions.
const DefaultBlockSize = 16

// KVInfo describes a backend's paged KV pool.
type KVInfo struct {
	// BlockSize is the number of token positions per block.
	BlockSize int
	// NumBlocks is the number of blocks in the pool.
	NumBlocks int
	// BytesPerBlock is the memory one block takes over the layers of a
	// group, K and V (KVBytesPerBlock of KVLayout.Size layers): every
	// layer when there is one group.
	BytesPerBlock int64
	// Windows is the pool's KVLayout.Windows: nil when one block table
	// serves every layer (SeqStep.Blocks), else the window of each layer
	// group (0: the whole context), one block table each (SeqStep.Tables).
	Windows []int
	// Type is the element type of the cache: "f16" or "f32".
	Type string
}

// KVBytesPerBlock is the memory one KV block takes over the layers it
// holds (every layer, or KVLayout.Size of a grouped pool), K and V:
// 2 * layers * blockSize * kvDim * elemBytes, where kvDim is KV heads x head
// dimension and elemBytes is 2 for an F16 cache, 4 for F32. Every backend
// and every pool sizing uses it, so that the pool the sizing planned is the
// pool the backend allocates.
func KVBytesPerBlock(layers, kvDim, blockSize, elemBytes int) int64 {
	return 2 * int64(layers) * int64(blockSize) * int64(kvDim) * int64(elemBytes)
}

// DraftRequest asks a draft source for tokens to propose after a sequence's
// history (speculative decoding with a draft model: runtime.DraftModel).
type DraftRequest struct {
	// Seq identifies the sequence; the source may keep state under it
	// until it is told to forget it.
	Seq uint64
	// History is every token of the sequence: prompt and generated, the
	// last one being the token the target feeds next. The source reads it
	// during the call only.
	History []int32
	// Max is the most tokens the source may propose.
	Max int
	// Out receives the proposal: the source appends up to Max tokens to
	// it (and appends nothing when it has no proposal).
	Out []int32
}
