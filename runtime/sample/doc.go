// Package sample turns one sequence's logits into its next token.
//
// A Sampler belongs to one sequence. The scheduler makes it with New from the
// request's Params (checked first with Params.Validate, whose errors wrap
// ErrInvalidParams and map to InvalidArgument) and the prompt tokens, and
// hands it to runtime.Engine.Step beside the sequence's batch.SeqStep; the
// engine calls Sample once per generated token (backends never see it).
// Sample records the token it returns; Accept is only for tokens that did
// not come from Sample (forced tokens, or replaying the generated tokens
// into a Sampler rebuilt for a resumed sequence).
//
// # Pipeline
//
// Sample copies the logits into per-Sampler scratch (the caller's slice is
// never written) and applies, in order:
//
//  0. the constraint's mask (Params.Constraint: structured output), which
//     sets every token its state does not allow to -Inf, so penalties and
//     filters only ever see allowed tokens;
//  1. repetition penalty (CTRL/llama.cpp style: positive logits divided,
//     negative ones multiplied) to every distinct token among the last
//     PenaltyLastN tokens of prompt+generated text (default 64, -1 = all);
//  2. presence and frequency penalties over the generated tokens only
//     (OpenAI/vLLM: logit -= presence*[count>0] + frequency*count);
//  3. Temperature 0: greedy argmax, ties to the lowest id. Otherwise
//     temperature, top-k, top-p (smallest set, best first, whose
//     probability reaches TopP), min-p (tokens with probability at least
//     MinP times the best one's), and a draw from the renormalized rest.
//
// Tokens are ordered by logit and then by id, a strict total order, so the
// filters are deterministic even with ties.
//
// # Randomness
//
// The draw of generated token i uses a PCG generator (math/rand/v2) seeded
// from SplitMix64(Params.Seed) and i. A sequence's output therefore depends
// only on its seed, its logits and its history: not on batch composition,
// not on preemption, not on whether the Sampler was rebuilt, and not on
// speculative decoding, whose verification (runtime.Engine.StepDrafts)
// calls Sample for each drafted position in turn and accepts a draft when
// Sample returns it.
//
// # Logprobs
//
// Result.Logprob and Result.Top are the natural-log softmax of the raw
// logits the model produced, before penalties, temperature and filters (what
// vLLM reports by default). They describe the model's prediction, so a token
// filtered out by top-k can still appear in Top. They cost one extra pass over
// the vocabulary and are computed only when asked for. Under a constraint
// they are the log-softmax of the masked raw logits: the model's prediction
// restricted to the tokens that could be sampled.
//
// # Constraints
//
// Each Sampler holds its own ConstraintState, advanced by every Sample and
// Accept, so a Sampler rebuilt for a resumed sequence and fed the generated
// tokens through Accept reaches the same state. When the constraint allows
// only suppressed tokens (a complete output that may only end, before
// SuppressUntil), the suppression yields: the constraint wins over
// min_tokens.
//
// # Cost
//
// Scratch buffers (three vocabulary-sized slices) are allocated on the first
// Sample and reused: Sample does not allocate afterwards except for
// Result.Top. Top-k with k <= 1024 is a single pass with a k-element heap;
// top-p without top-k selects and sorts a growing prefix (64, 512, 4096, ...)
// instead of sorting the vocabulary. Whole-vocabulary exponentials use a
// float32-accurate exp (expNeg).
//
// Example:
//
//	if err := p.Validate(vocab); err != nil {
//		return err // InvalidArgument
//	}
//	s := sample.New(p, promptTokens)
//	for {
//		logits := forward(...)
//		res := s.Sample(logits) // recorded: no Accept needed
//		emit(res.Token)
//	}
package sample
