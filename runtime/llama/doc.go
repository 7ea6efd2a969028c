// Package llama holds Llama-family models (architectures llama, qwen2,
// qwen3, gemma3 and the mixtures of experts qwen3moe and gpt-oss):
// hyper-parameters, loading from GGUF, and generated random-weight models.
// It runs nothing: the CPU backend is runtime/cpu, the GPU one cuda, and
// both read the Model defined here.
//
// # Loading
//
// FromGGUF reads the hyper-parameters and builds a Model whose weights are
// views into the GGUF data (no copy). Unknown architectures, unsupported
// tensor types, partial rotary embeddings and unexpected tensors are refused
// with errors wrapping ErrUnsupported; every tensor's shape is checked. Llama
// 2/3.x, TinyLlama, SmolLM2 and Mistral load as "llama" (GQA, tied or
// separate output, llama3 rope frequency scaling from rope_freqs.weight or
// the rope.scaling.* keys); Qwen2 adds QKV biases and the NEOX rotation;
// Qwen3 drops the biases and adds per-head RMS norms of q and k before the
// rotation, with a head dimension of its own (attention.key_length, so
// n_head x head_dim need not be n_embd). Gemma 3 adds to those norms an
// input embedding scaled by sqrt(n_embd), post-attention and post-FFN
// norms, a GELU(tanh) FFN, q scaled by 1/sqrt(key_length)
// (1/sqrt(n_embd/n_head) for the 62-layer model, as llama.cpp), tied
// output, and sliding-window attention on the layers of
// attention.sliding_window_pattern (llama.cpp's default: five of every
// six), which use rope.freq_base_swa (default 10000).
//
// Qwen3-MoE is Qwen3's attention with a mixture-of-experts FFN (MoELayer):
// a router (ffn_gate_inp, F32), expert_count experts stacked in 3-D tensors
// (ffn_{gate,up,down}_exps; expert e's matrix is a view of the e-th slice),
// expert_used_count of them per token, gated by a softmax over all router
// logits, top-k and renormalisation (GatingSoftmax, as llama.cpp hard-codes
// it). gpt-oss (llama.cpp's OPENAI_MOE) adds Q/K/V and output biases,
// per-head attention sinks, post_attention_norm as the pre-FFN norm,
// router and expert biases, top-k then a softmax over the chosen logits
// (GatingTopKSoftmax), the clamped SwiGLU (limit 7, alpha 1.702, hard-coded
// as in llama.cpp), sliding windows on even layers (default pattern 2, the
// global rotary base) and YaRN rotary scaling (rope.scaling.type yarn: the
// YaRN parameters llama.cpp derives, beta 32/1).
//
// What an architecture changes is recorded in the Model, not left to the
// backends: HParams holds the model-wide properties (rotation, embedding
// and attention scales, activation, logit softcapping) and each Layer its
// optional norms, sliding window and rotary base. A backend reads these
// fields and never tests HParams.Arch; one that lacks a feature refuses
// the model, naming it (the GPU backend refuses the MoE FFN, sinks and
// YaRN). The Model is valid while the GGUF file it came from stays open.
//
// # Generated models
//
// Generate writes random-weight llama GGUFs (Preset "synth-110m", the
// reference shape of docs/reference-numbers.md, and "tiny", the built-in
// weft-tiny) with quant.Quantize's simple F32/F16/Q8_0/Q4_0/Q4_K encoders,
// and, with GenConfig.MoE, qwen3moe and gpt-oss models (Presets
// "qwen3moe-1.5b" and "gptoss-1.5b"). They are test and benchmark
// fixtures, NOT trained models.
//
// # Example
//
//	f, _ := gguf.Open("model.gguf")
//	m, err := llama.FromGGUF(f)
//	be, err := cpu.New(m, cpu.Config{KVType: "f16"})
package llama
