// Package llama holds Llama-family models (architectures llama and qwen2)
// and runs them on the CPU.
//
// # Loading
//
// FromGGUF reads the hyper-parameters and builds a Model whose weights are
// views into the GGUF data (no copy). Unknown architectures, unsupported
// tensor types, partial rotary embeddings and unexpected tensors are refused
// with errors wrapping ErrUnsupported; every tensor's shape is checked. Llama
// 2/3.x, TinyLlama, SmolLM2 and Mistral load as "llama" (GQA, tied or
// separate output, llama3 rope frequency scaling from rope_freqs.weight or
// the rope.scaling.* keys); Qwen2 adds QKV biases and the NEOX rotation.
//
// # The CPU backend
//
// CPUBackend implements the runtime Backend (runtime/batch): a paged KV
// cache of NumBlocks blocks of BlockSize positions, per layer, K and V, in
// F16 (default, like llama.cpp) or F32. Forward runs ONE pass for a ragged
// batch: all tokens of all sequences (prompt chunks and single decode
// tokens) form one activation matrix, so each weight matrix is read once
// per step (quant.MatMul with n = total tokens); the Q, K and V products of
// one input, and gate and up, each run as one quant.MatMuls job (one pool
// handoff). Attention is per sequence, through its block table, parallel
// over (sequence, KV head); its scores are one F32 product of K with the
// query (quant.MatMul), its output quant.MulVecT over V, and long chunks use
// two matrix products per KV head. Logits are
// computed only for the last token of sequences that ask for them.
//
// Numerics follow ggml so that greedy tokens match llama.cpp: RMS norm with
// a float64 sum of squares, RoPE angles by repeated float32 multiplication
// (theta_i = pos·base^(-2i/d)), softmax with a float64 sum, F16 rounding of
// the K/V written to an F16 cache and of the query and softmax weights that
// meet them, and of the activations entering F16 matmuls (rounded once per
// input, quant.RoundF16s). The exponentials of SiLU and softmax use quant's
// vector exponential (within 2e-7 relative), as ggml uses its own vector
// approximation.
//
// Per-step scratch is allocated once (grown to the largest batch seen) and
// reused. Forward must not be called concurrently.
//
// # Generated models
//
// Generate writes random-weight llama GGUFs (Preset "synth-110m", the
// reference shape of docs/reference-numbers.md, and "tiny", the built-in
// weft-tiny) with Quantize's simple F32/F16/Q8_0/Q4_0/Q4_K encoders. They
// are test and benchmark fixtures, NOT trained models.
//
// # Example
//
//	f, _ := gguf.Open("model.gguf")
//	m, err := llama.FromGGUF(f)
//	be, err := llama.NewCPUBackend(m, llama.CPUConfig{KVType: "f16"})
//	logits := make([]float32, m.HP.VocabSize)
//	err = be.Forward(ctx, []batch.SeqStep{{Tokens: ids, Blocks: []int32{0}}}, [][]float32{logits})
package llama
