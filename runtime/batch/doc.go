// Package batch is the contract between the step loop and a compute
// backend: one decoding step's ragged batch (SeqStep), the Backend that runs
// it, the shape of its paged KV pool (KVInfo and KVBytesPerBlock, the one
// formula for a block's size), and the errors a step reports per sequence
// (SeqError, StepErrors, ErrNonFinite).
//
// It is a leaf: it imports nothing of weft, so the scheduler (which builds
// SeqSteps), runtime.Engine (which runs them and samples) and the backends
// (runtime/cpu, cuda) all depend on it and on nothing of each other.
//
// A SeqStep carries no sampler: Logits says that the step must produce
// the sequence's last-token logits, and sampling is the Engine's alone.
// Draft (speculative decoding) asks for the logits of the row's last
// Draft+1 tokens instead, from a Backend that implements DraftLogits.
//
// Example (a backend's caller):
//
//	seqs := []batch.SeqStep{{Seq: 1, Tokens: prompt, Blocks: []int32{0, 1}, Logits: true}}
//	logits := [][]float32{make([]float32, vocab)}
//	err := be.Forward(ctx, seqs, logits)
package batch
