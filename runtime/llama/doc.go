// Package llama holds Llama-family models (architectures llama and qwen2):
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
// the rope.scaling.* keys); Qwen2 adds QKV biases and the NEOX rotation.
// The Model is valid while the GGUF file it came from stays open.
//
// # Generated models
//
// Generate writes random-weight llama GGUFs (Preset "synth-110m", the
// reference shape of docs/reference-numbers.md, and "tiny", the built-in
// weft-tiny) with quant.Quantize's simple F32/F16/Q8_0/Q4_0/Q4_K encoders. They
// are test and benchmark fixtures, NOT trained models.
//
// # Example
//
//	f, _ := gguf.Open("model.gguf")
//	m, err := llama.FromGGUF(f)
//	be, err := cpu.New(m, cpu.Config{KVType: "f16"})
package llama
