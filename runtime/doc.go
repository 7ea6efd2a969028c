// Package runtime loads models and runs decoding steps: it bundles a GGUF
// file's weights (runtime/llama), tokenizer (runtime/tokenizer) and chat
// template into a Model, and drives a batch.Backend through an Engine.
//
// # Layout
//
//	runtime/batch   the step contract (SeqStep, Backend, KVInfo, KVBytesPerBlock,
//	                StepErrors); a leaf the scheduler and the backends share
//	runtime/sample  the per-sequence sampler
//	runtime/llama   the model: hyper-parameters, GGUF loading, generated models
//	runtime/cpu     the CPU backend and its KV pool sizing
//	runtime/quant   tensor formats: dequantization, encoders, F16, the Weight view
//	runtime/kernels the CPU kernels: matmul, attention, worker pool, ISA choice, peaks
//	runtime/gguf, tokenizer, chat   the file, the vocabulary, the chat templates
//	runtime         Model (all of the above for one file) and Engine
//
// # Pieces
//
//   - Load(path) memory-maps a GGUF, checks the architecture, every tensor's
//     type and shape, and builds the tokenizer. LoadDefault() builds the
//     built-in model weft-tiny: random weights generated deterministically in
//     memory, serialized as GGUF and parsed by the same code as a file. It is
//     NOT a trained model; it lets weft run with nothing downloaded.
//   - A batch.Backend runs the forward pass of one ragged batch: the CPU
//     one (runtime/cpu, Model.NewCPUBackend) or the CUDA one (cuda).
//   - Engine.Step runs Backend.Forward for a batch and samples the next token
//     of every sequence that asks for logits, with the sampler given beside
//     it; it is the only place that samples. It implements the scheduler's
//     Model interface. Engine.StepDrafts also verifies drafted tokens
//     (speculative decoding, batch.SeqStep.Draft) when the backend computes
//     their logits (VerifiesDrafts): it samples each drafted position from
//     the sampler's state after the tokens accepted before it and accepts
//     the drafts Sample returns, which is exact rejection sampling for a
//     deterministic draft (see StepDrafts).
//   - DraftModel makes those drafts with a second model of the same
//     vocabulary (CheckDraftVocab): greedy, over its own backend and KV
//     pool, one ragged batch per draft position for every drafting
//     sequence; it implements the scheduler's Drafter.
//
// # Ownership and invariants
//
// A Model owns the file mapping: its weights, and every backend built on
// it, are valid until Model.Close. The Engine and its Backend belong to one
// goroutine (the scheduler's step loop): Step is not safe for concurrent
// use. The Engine keeps one logits buffer for the step's rows (a
// vocabulary-sized row per sampled position), reused across steps. A
// backend error fails the whole step; a sampling failure of one sequence
// (non-finite logits, a panicking sampler) is reported in a
// batch.StepErrors and fails only that sequence.
//
// # Example
//
//	m, err := runtime.Load("model.gguf")
//	if err != nil { ... }
//	defer m.Close()
//	be, err := m.NewCPUBackend(cpu.Config{})
//	eng := runtime.NewEngine(be, m.HP.VocabSize)
//	ids := m.Tok.Encode("Once upon a time", true, true)
//	res, err := eng.Step(ctx,
//		[]batch.SeqStep{{Seq: 1, Tokens: ids, Blocks: []int32{0, 1}, Logits: true}},
//		[]*sample.Sampler{sample.New(sample.Params{}, ids)})
//	next := res[0].Token
package runtime
