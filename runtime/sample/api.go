package sample

// Params are a request's sampling parameters. Zero values mean "off"
// (Temperature 0 is greedy).
type Params struct {
	Temperature       float32 // 0: greedy (argmax)
	TopK              int     // 0: off
	TopP              float32 // 0 or 1: off
	MinP              float32 // 0: off
	RepetitionPenalty float32 // 0 or 1: off (llama.cpp/CTRL style: divide positive logits, multiply negative)
	PresencePenalty   float32 // 0: off
	FrequencyPenalty  float32 // 0: off
	Seed              uint64  // RNG seed; same seed, same output
	Logprobs          bool    // report the chosen token's logprob
	TopLogprobs       int     // also report the n most likely tokens (0: none)

	// PenaltyLastN is the window of RepetitionPenalty: the last N tokens of
	// prompt+generated text are penalized. 0 means DefaultPenaltyLastN (64,
	// llama.cpp's penalty_last_n default); -1 means the whole sequence.
	// Presence and frequency penalties ignore it: they count every generated
	// token (OpenAI/vLLM semantics).
	PenaltyLastN int

	// Suppress lists tokens that cannot be sampled while fewer than
	// SuppressUntil tokens have been generated (min_tokens: the scheduler
	// puts the end-of-generation and stop token ids here). Logprobs still
	// describe the raw logits.
	Suppress      []int32
	SuppressUntil int

	// Constraint, when set, restricts the tokens to those its state allows
	// (structured output); nil: no restriction.
	Constraint Constraint
}

// Constraint is a restriction on a sequence's tokens shared by the
// sequences of a request; NewState gives each sequence its own state.
type Constraint interface {
	NewState() ConstraintState
}

// ConstraintState is one sequence's progress through a Constraint.
type ConstraintState interface {
	// Allowed returns the tokens allowed next as a bitset: bit t%64 of
	// word t/64 is set when token t may come next. The caller does not
	// modify it.
	Allowed() []uint64
	// Accept advances past tok; an error means tok was not allowed (the
	// state then allows only ending).
	Accept(tok int32) error
}

// TokenLogprob is one token with its log-probability (natural log, over the
// full softmax of the model's logits before sampling filters).
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// Result is one sampled token.
type Result struct {
	Token   int32
	Logprob float32        // valid when Params.Logprobs (or TopLogprobs > 0)
	Top     []TokenLogprob // len Params.TopLogprobs, most likely first
}
