package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
)

// Engine runs steps on a Backend and samples each sequence's next token. It
// implements the scheduler's Model interface. Step must not be called
// concurrently (the step loop owns the engine).
type Engine struct {
	b     Backend
	vocab int
	// logits holds one vocabulary-sized buffer per batch slot, grown to the
	// largest number of sampled sequences seen and reused.
	logits [][]float32
	slots  [][]float32
	idx    []int
}

// NewEngine returns an engine over b for a model with vocabSize logits.
func NewEngine(b Backend, vocabSize int) *Engine {
	return &Engine{b: b, vocab: vocabSize}
}

// Backend returns the engine's backend.
func (e *Engine) Backend() Backend { return e.b }

// SeqError is a sampling failure of one sequence of a step.
type SeqError struct {
	Index int    // index in the step's seqs
	Seq   uint64 // SeqStep.Seq
	Err   error
}

func (e SeqError) Error() string { return fmt.Sprintf("sequence %d: %v", e.Seq, e.Err) }
func (e SeqError) Unwrap() error { return e.Err }

// StepErrors is returned by Step when sampling failed for some sequences
// only: the results of the other sequences are valid and the caller should
// fail just the listed ones (errors.As(err, &stepErrs)).
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

// parallelSample is the number of sampled sequences from which sampling is
// spread over goroutines.
const parallelSample = 4

// Step runs one forward pass over seqs and samples every sequence that has
// a Sampler: results[i] is valid when seqs[i].Sampler != nil.
//
// A backend error fails the whole step (results nil). A failure while
// sampling one sequence (non-finite logits, a panic inside its sampler)
// fails only that sequence: Step then returns the results together with a
// StepErrors listing the failed indices; every other result is valid.
func (e *Engine) Step(ctx context.Context, seqs []SeqStep) ([]Sampled, error) {
	n := 0
	for _, s := range seqs {
		if s.Sampler != nil {
			n++
		}
	}
	for len(e.logits) < n {
		e.logits = append(e.logits, make([]float32, e.vocab))
	}
	if cap(e.slots) < len(seqs) {
		e.slots = make([][]float32, len(seqs))
	}
	slots := e.slots[:len(seqs)]
	k := 0
	idx := e.idx[:0]
	for i, s := range seqs {
		slots[i] = nil
		if s.Sampler != nil {
			slots[i] = e.logits[k]
			k++
			idx = append(idx, i)
		}
	}
	e.idx = idx
	if err := e.b.Forward(ctx, seqs, slots); err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	results := make([]Sampled, len(seqs))
	errs := make([]error, len(seqs))
	sampleOne := func(i int) {
		defer func() {
			if r := recover(); r != nil {
				errs[i] = fmt.Errorf("sampler panic: %v", r)
			}
		}()
		for _, v := range slots[i] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				errs[i] = ErrNonFinite
				return
			}
		}
		results[i] = seqs[i].Sampler.Sample(slots[i])
	}
	if workers := min(goruntime.GOMAXPROCS(0), len(idx)); len(idx) >= parallelSample && workers > 1 {
		var wg sync.WaitGroup
		per := (len(idx) + workers - 1) / workers
		for w := 0; w*per < len(idx); w++ {
			part := idx[w*per : min((w+1)*per, len(idx))]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, i := range part {
					sampleOne(i)
				}
			}()
		}
		wg.Wait()
	} else {
		for _, i := range idx {
			sampleOne(i)
		}
	}
	var se StepErrors
	for i, err := range errs {
		if err != nil {
			se = append(se, SeqError{Index: i, Seq: seqs[i].Seq, Err: err})
		}
	}
	if se != nil {
		sort.Slice(se, func(a, b int) bool { return se[a].Index < se[b].Index })
		return results, se
	}
	return results, nil
}
