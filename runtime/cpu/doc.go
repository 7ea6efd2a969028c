// Package cpu is weft's CPU backend: it runs a runtime/llama Model on the
// CPU with a paged KV cache, implementing batch.Backend, and sizes its own
// KV pool.
//
// # The backend
//
// New(m, Config) allocates a KV pool of Config.NumBlocks blocks of
// BlockSize positions, per layer, K and V, in F16 (default, like llama.cpp),
// F32 or Q8_0 (int8 with a float32 scale per 32 elements, the values
// ggml's q8_0 cache holds: kernels.QuantizeKVQ8 when a row is stored,
// kernels.AttendQ8 reading it in place, kernels.DequantizeKVQ8 for the
// gathered rows of long chunks). On Linux the pool is mapped outside the Go heap, on transparent
// huge pages where the kernel grants them (madvise mode), and populated at
// New (kvmem.go): serving never pays its first-touch page faults, which
// otherwise land on the steps of the first minutes as fresh blocks are
// handed out, and the GC's heap goal does not count it. Close gives the
// memory back. Forward runs ONE pass for a ragged batch: all tokens of all
// sequences (prompt chunks and single decode tokens) form one activation
// matrix, so each weight matrix is read once per step (kernels.MatMul with
// n = total tokens); the Q, K and V products of one input, and gate and up,
// each run as one kernels.MatMuls job (one pool handoff). Attention is per
// sequence, through its block table, parallel over (sequence, KV head);
// short chunks read the cache in place (kernels.AttendF16/AttendF32/AttendQ8), long
// ones gather the head's rows as float32 (K in panels) and run
// kernels.AttendChunk, which takes the chunk's tokens a few at a time for
// all the KV head's query heads. A sliding layer (llama.Layer.Window)
// attends from the first visible position in both paths (PagedKV.First;
// the gathered rows start there and each token's softmax starts at its
// window), so hidden keys are never read.
//
// The forward pass follows the Model's fields, never its architecture's
// name: optional q/k head norms before RoPE, one RoPE table per distinct
// layer base, embedding and query scales, post-attention and post-FFN
// norms, the FFN activation (SiLU, or GELU through ggml's F16 table as
// geluMul copies it) and logit softcapping; attention sinks
// (llama.Layer.Sinks, in both attention paths), the attention output bias,
// YaRN's angle mix and magnitude in the RoPE table (yarn.go, as ggml's
// rope_yarn), and the mixture-of-experts FFN.
//
// The MoE FFN (moe.go) routes each token (the router product, then
// llama.cpp's gating in its order of operations), then runs the experts
// grouped over the whole step: every row routed to an expert, from any
// sequence, prompt chunk or decode token, is gathered, the expert's
// gate/up/down products run once over those rows (the kernel chosen by
// their count) and each result is scattered back, weighted, and summed
// over the token's slots in order. Under kernels.BatchInvariant every
// product treats its rows alike, so a token's output is the same bits
// however the step's tokens are grouped.
// Logits are computed only for the last token of sequences whose logits
// slot is non-nil (SeqStep.Logits), or for their last Draft+1 tokens when
// the row carries drafts to verify (SeqStep.Draft, speculative decoding:
// the backend reports DraftLogits); every wanted row of the step goes
// through one output-matrix product. The backend never samples: that is
// runtime.Engine's job. A kernel that fails (kernels.ErrKernel: its scratch
// could not be allocated) makes Forward return the error, wrapped with the
// layer and product: every product covers all the step's sequences, so the
// step fails as a whole, and the scheduler fails its sequences while the
// process and the backend go on serving.
//
// Numerics follow ggml so that greedy tokens match llama.cpp: RMS norm with
// a float64 sum of squares, RoPE angles by repeated float32 multiplication
// (theta_i = pos·base^(-2i/d)), softmax with a float64 sum, F16 rounding of
// the K/V written to an F16 cache and of the query and softmax weights that
// meet them, and of the activations entering F16 matmuls (rounded once per
// input, kernels.RoundF16s). The exponentials of SiLU and softmax use the kernels'
// vector exponential (within 2e-7 relative), as ggml uses its own vector
// approximation.
//
// # Pool sizing
//
// PlanPool turns a memory budget into Config.NumBlocks: exactly
// floor(KVMemory / bytes-per-block) with a byte budget (--kv-memory), else
// RAMFraction of the machine's RAM (SystemMemory, from /proc/meminfo) less
// the weights, capped at MaxSeqs full contexts. A block's size is
// batch.KVBytesPerBlock, the same formula the backend reports in KV. The
// Plan's String is the log line with the arithmetic.
//
// # Ownership
//
// The Backend holds views into the Model's weights (valid until the GGUF
// mapping is closed) and owns its KV pool and per-step scratch (allocated
// once, grown to the largest batch seen). Forward must not be called
// concurrently: the scheduler's step loop owns the backend. Attention and
// matrix products share the kernels' worker pool.
//
// # Example
//
//	plan, err := cpu.PlanPool(cpu.PoolConfig{TotalRAM: ram, Layers: hp.Layers,
//		KVDim: hp.KVHeads * hp.HeadDim, ContextLen: hp.ContextLen})
//	be, err := cpu.New(m, cpu.Config{NumBlocks: plan.NumBlocks})
//	logits := make([]float32, hp.VocabSize)
//	err = be.Forward(ctx, []batch.SeqStep{{Tokens: ids, Blocks: []int32{0}, Logits: true}}, [][]float32{logits})
package cpu
