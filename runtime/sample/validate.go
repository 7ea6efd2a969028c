package sample

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalidParams is wrapped by every error Validate returns; the server
// maps it to codes.InvalidArgument.
var ErrInvalidParams = errors.New("invalid sampling parameters")

// Upper bounds of the parameters that have no natural one. Above them the
// distribution no longer changes in any useful way (a temperature of 100
// is already uniform over the vocabulary for any real model), so a larger
// value is a client's mistake, not a wish.
const (
	MaxTemperature       = 100
	MaxRepetitionPenalty = 10
)

// ParamError is the error Validate returns: the parameter it refuses and
// why. It wraps ErrInvalidParams.
type ParamError struct {
	// Field names the parameter as the Params field's snake_case name
	// ("temperature", "top_p", "top_logprobs", ...).
	Field string
	// Msg says what the value is and what it must be.
	Msg string
}

func (e *ParamError) Error() string { return ErrInvalidParams.Error() + ": " + e.Field + " " + e.Msg }

// Unwrap returns ErrInvalidParams.
func (e *ParamError) Unwrap() error { return ErrInvalidParams }

// Validate reports parameters that make no sense for a model with vocabSize
// tokens. It is the one owner of the sampling parameters' ranges: the
// scheduler calls it on every submitted request and the front doors leave
// these ranges to it. The error is a *ParamError naming the field and value.
func (p Params) Validate(vocabSize int) error {
	bad := func(field, format string, args ...any) error {
		return &ParamError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	finite := func(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }
	switch {
	case vocabSize <= 0:
		return bad("vocab_size", "%d is not positive", vocabSize)
	case !finite(p.Temperature) || p.Temperature < 0 || p.Temperature > MaxTemperature:
		return bad("temperature", "%v must be in [0, %d]", p.Temperature, MaxTemperature)
	case p.TopK < 0:
		return bad("top_k", "%d must be >= 0 (0 disables it)", p.TopK)
	case !finite(p.TopP) || p.TopP < 0 || p.TopP > 1:
		return bad("top_p", "%v must be in [0, 1] (0 or 1 disables it)", p.TopP)
	case !finite(p.MinP) || p.MinP < 0 || p.MinP > 1:
		return bad("min_p", "%v must be in [0, 1] (0 disables it)", p.MinP)
	case !finite(p.RepetitionPenalty) || p.RepetitionPenalty < 0 || p.RepetitionPenalty > MaxRepetitionPenalty:
		return bad("repetition_penalty", "%v must be in [0, %d] (0 or 1 disables it)", p.RepetitionPenalty, MaxRepetitionPenalty)
	case !finite(p.PresencePenalty) || p.PresencePenalty < -2 || p.PresencePenalty > 2:
		return bad("presence_penalty", "%v must be in [-2, 2]", p.PresencePenalty)
	case !finite(p.FrequencyPenalty) || p.FrequencyPenalty < -2 || p.FrequencyPenalty > 2:
		return bad("frequency_penalty", "%v must be in [-2, 2]", p.FrequencyPenalty)
	case p.TopLogprobs < 0 || p.TopLogprobs > MaxTopLogprobs:
		return bad("top_logprobs", "%d must be in [0, %d]", p.TopLogprobs, MaxTopLogprobs)
	case p.TopLogprobs > vocabSize:
		return bad("top_logprobs", "%d exceeds the vocabulary size %d", p.TopLogprobs, vocabSize)
	case p.PenaltyLastN < -1:
		return bad("penalty_last_n", "%d must be >= -1 (-1: whole sequence, 0: default %d)", p.PenaltyLastN, DefaultPenaltyLastN)
	}
	return nil
}
