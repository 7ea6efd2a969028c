// Package runtime loads models and runs decoding steps: it bundles a GGUF
// file's weights (runtime/llama), tokenizer (runtime/tokenizer) and chat
// template into a Model, and drives a Backend through an Engine.
//
// # Pieces
//
//   - Load(path) memory-maps a GGUF, checks the architecture, every tensor's
//     type and shape, and builds the tokenizer. LoadDefault() builds the
//     built-in model weft-tiny: random weights generated deterministically in
//     memory, serialized as GGUF and parsed by the same code as a file. It is
//     NOT a trained model; it lets weft run with nothing downloaded.
//   - Backend (defined in runtime/batch, re-exported here) runs the forward
//     pass of one ragged batch: runtime/llama's CPUBackend or the CUDA one.
//   - Engine.Step runs Backend.Forward for a batch and samples the next token
//     of every sequence that carries a Sampler. It implements the
//     scheduler's Model interface.
//
// # Ownership and invariants
//
// A Model owns the file mapping: its weights, and every backend built on
// it, are valid until Model.Close. The Engine and its Backend belong to one
// goroutine (the scheduler's step loop): Step is not safe for concurrent
// use. The Engine keeps one vocabulary-sized logits buffer per batch slot,
// reused across steps. A backend error fails the whole step; a sampling
// failure of one sequence (non-finite logits, a panicking sampler) is
// reported in a StepErrors and fails only that sequence.
//
// # Example
//
//	m, err := runtime.Load("model.gguf")
//	if err != nil { ... }
//	defer m.Close()
//	be, err := m.NewCPUBackend(llama.CPUConfig{})
//	eng := runtime.NewEngine(be, m.HP.VocabSize)
//	ids := m.Tok.Encode("Once upon a time", true, true)
//	res, err := eng.Step(ctx, []runtime.SeqStep{{
//		Seq: 1, Tokens: ids, Blocks: []int32{0, 1},
//		Sampler: sample.New(sample.Params{}, ids),
//	}})
//	next := res[0].Token
package runtime
