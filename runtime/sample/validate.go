package sample

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalidParams is wrapped by every error Validate returns; the server
// maps it to codes.InvalidArgument.
var ErrInvalidParams = errors.New("invalid sampling parameters")

// Validate reports parameters that make no sense for a model with vocabSize
// tokens. The error wraps ErrInvalidParams and names the field and value.
func (p Params) Validate(vocabSize int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidParams, fmt.Sprintf(format, args...))
	}
	finite := func(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }
	switch {
	case vocabSize <= 0:
		return bad("vocabulary size %d is not positive", vocabSize)
	case !finite(p.Temperature) || p.Temperature < 0:
		return bad("temperature %v must be a finite number >= 0", p.Temperature)
	case p.TopK < 0:
		return bad("top_k %d must be >= 0 (0 disables it)", p.TopK)
	case !finite(p.TopP) || p.TopP < 0 || p.TopP > 1:
		return bad("top_p %v must be in [0, 1] (0 or 1 disables it)", p.TopP)
	case !finite(p.MinP) || p.MinP < 0 || p.MinP > 1:
		return bad("min_p %v must be in [0, 1] (0 disables it)", p.MinP)
	case !finite(p.RepetitionPenalty) || p.RepetitionPenalty < 0:
		return bad("repetition_penalty %v must be a finite number >= 0 (0 or 1 disables it)", p.RepetitionPenalty)
	case !finite(p.PresencePenalty) || p.PresencePenalty < -2 || p.PresencePenalty > 2:
		return bad("presence_penalty %v must be in [-2, 2]", p.PresencePenalty)
	case !finite(p.FrequencyPenalty) || p.FrequencyPenalty < -2 || p.FrequencyPenalty > 2:
		return bad("frequency_penalty %v must be in [-2, 2]", p.FrequencyPenalty)
	case p.TopLogprobs < 0 || p.TopLogprobs > MaxTopLogprobs:
		return bad("top_logprobs %d must be in [0, %d]", p.TopLogprobs, MaxTopLogprobs)
	case p.TopLogprobs > vocabSize:
		return bad("top_logprobs %d exceeds the vocabulary size %d", p.TopLogprobs, vocabSize)
	case p.PenaltyLastN < -1:
		return bad("penalty_last_n %d must be >= -1 (-1: whole sequence, 0: default %d)", p.PenaltyLastN, DefaultPenaltyLastN)
	}
	return nil
}
