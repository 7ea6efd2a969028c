package runtime

import "github.com/weft-inference/weft/runtime/batch"

// The backend contract is defined in runtime/batch (so that backends such as
// runtime/llama can implement it while this package bundles them) and
// re-exported here under the same names; see that package for the docs.
type (
	// SeqStep is one sequence's share of a decoding step: a prompt chunk or
	// a single decode token, with the KV blocks it reads and writes.
	SeqStep = batch.SeqStep
	// Sampled is what a step returns for one SeqStep with a Sampler.
	Sampled = batch.Sampled
	// Backend runs the model's forward pass on a ragged batch.
	Backend = batch.Backend
	// KVInfo describes a backend's paged KV pool.
	KVInfo = batch.KVInfo
)
