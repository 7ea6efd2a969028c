package batch

import (
	"errors"
	"fmt"
	"strings"
)

// SeqError is a failure of one sequence of a step.
type SeqError struct {
	Index int    // index in the step's seqs
	Seq   uint64 // SeqStep.Seq
	Err   error
}

func (e SeqError) Error() string { return fmt.Sprintf("sequence %d: %v", e.Seq, e.Err) }
func (e SeqError) Unwrap() error { return e.Err }

// StepErrors is returned by a step when some sequences failed and the
// others did not: the results of the other sequences are valid and the
// caller fails just the listed ones (errors.As(err, &stepErrs)). It is
// sorted by Index.
type StepErrors []SeqError

func (s StepErrors) Error() string {
	parts := make([]string, len(s))
	for i, e := range s {
		parts[i] = e.Error()
	}
	return "sampling failed: " + strings.Join(parts, "; ")
}

// Failed reports whether seqs[i] failed.
func (s StepErrors) Failed(i int) bool {
	for _, e := range s {
		if e.Index == i {
			return true
		}
	}
	return false
}

// ErrNonFinite is wrapped in a SeqError when a sequence's logits contain
// NaN or infinities.
var ErrNonFinite = errors.New("non-finite logits")
