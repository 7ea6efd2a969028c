package runtime

import (
	"context"
	"fmt"
	"math"
	goruntime "runtime"
	"sort"
	"sync"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// Engine runs steps on a backend and samples each sequence's next token: it
// is the only place that samples, backends only produce logits. It
// implements the scheduler's Model interface. Step must not be called
// concurrently (the step loop owns the engine).
type Engine struct {
	b     batch.Backend
	vocab int
	// logits holds one vocabulary-sized buffer per batch slot, grown to the
	// largest number of sampled sequences seen and reused.
	logits [][]float32
	slots  [][]float32
	idx    []int
}

// NewEngine returns an engine over b for a model with vocabSize logits.
func NewEngine(b batch.Backend, vocabSize int) *Engine {
	return &Engine{b: b, vocab: vocabSize}
}

// parallelSample is the number of sampled sequences from which sampling is
// spread over goroutines.
const parallelSample = 4

// Step runs one forward pass over seqs and samples every sequence that asks
// for logits: samplers has len(seqs) entries, samplers[i] is non-nil exactly
// when seqs[i].Logits, and results[i] is valid then.
//
// A backend error, or samplers that do not match seqs, fails the whole
// step (results nil). A failure while sampling one sequence (non-finite
// logits, a panic inside its sampler) fails only that sequence: Step then
// returns the results together with a batch.StepErrors listing the failed
// indices; every other result is valid.
func (e *Engine) Step(ctx context.Context, seqs []batch.SeqStep, samplers []*sample.Sampler) ([]sample.Result, error) {
	if len(samplers) != len(seqs) {
		return nil, fmt.Errorf("step: %d samplers for %d sequences", len(samplers), len(seqs))
	}
	n := 0
	for i, s := range seqs {
		if s.Logits != (samplers[i] != nil) {
			return nil, fmt.Errorf("step: sequence %d: Logits %v but sampler set %v", s.Seq, s.Logits, samplers[i] != nil)
		}
		if s.Logits {
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
		if s.Logits {
			slots[i] = e.logits[k]
			k++
			idx = append(idx, i)
		}
	}
	e.idx = idx
	if err := e.b.Forward(ctx, seqs, slots); err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	results := make([]sample.Result, len(seqs))
	errs := make([]error, len(seqs))
	sampleOne := func(i int) {
		defer func() {
			if r := recover(); r != nil {
				errs[i] = fmt.Errorf("sampler panic: %v", r)
			}
		}()
		for _, v := range slots[i] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				errs[i] = batch.ErrNonFinite
				return
			}
		}
		results[i] = samplers[i].Sample(slots[i])
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
	var se batch.StepErrors
	for i, err := range errs {
		if err != nil {
			se = append(se, batch.SeqError{Index: i, Seq: seqs[i].Seq, Err: err})
		}
	}
	if se != nil {
		sort.Slice(se, func(a, b int) bool { return se[a].Index < se[b].Index })
		return results, se
	}
	return results, nil
}
