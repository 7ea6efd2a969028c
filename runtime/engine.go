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
// implements the scheduler's Model interface, and its Verifier interface
// (StepDrafts) for speculative decoding when the backend computes logits of
// drafted tokens. Step must not be called concurrently (the step loop owns
// the engine).
type Engine struct {
	b     batch.Backend
	vocab int
	// buf holds every logits row of a step, grown to the most rows seen and
	// reused; slots[i] is row i's part of it.
	buf   []float32
	slots [][]float32
	idx   []int
	// out backs StepDrafts' per-row results (reused: valid until the next
	// step).
	out  [][]sample.Result
	flat []sample.Result
}

// NewEngine returns an engine over b for a model with vocabSize logits.
func NewEngine(b batch.Backend, vocabSize int) *Engine {
	return &Engine{b: b, vocab: vocabSize}
}

// VerifiesDrafts reports whether the backend computes the logits of drafted
// tokens (batch.DraftLogits), so that StepDrafts may be given rows with
// SeqStep.Draft > 0.
func (e *Engine) VerifiesDrafts() bool {
	d, ok := e.b.(batch.DraftLogits)
	return ok && d.DraftLogits()
}

// HiddenSize is the length of one token's hidden state when the backend
// produces them (batch.HiddenStates: SeqStep.Hidden is honoured), else 0.
func (e *Engine) HiddenSize() int {
	if h, ok := e.b.(batch.HiddenStates); ok {
		return h.HiddenSize()
	}
	return 0
}

// parallelSample is the number of sampled sequences from which sampling is
// spread over goroutines.
const parallelSample = 4

// Step runs one forward pass over seqs and samples every sequence that asks
// for logits: samplers has len(seqs) entries, samplers[i] is non-nil exactly
// when seqs[i].Logits, and results[i] is valid then. No row may carry
// drafts (StepDrafts verifies them). A row with Hidden set has its hidden
// states written there (the backend must produce them: HiddenSize > 0).
//
// A backend error, or samplers that do not match seqs, fails the whole
// step (results nil). A failure while sampling one sequence (non-finite
// logits, a panic inside its sampler) fails only that sequence: Step then
// returns the results together with a batch.StepErrors listing the failed
// indices; every other result is valid.
func (e *Engine) Step(ctx context.Context, seqs []batch.SeqStep, samplers []*sample.Sampler) ([]sample.Result, error) {
	for _, s := range seqs {
		if s.Draft != 0 {
			return nil, fmt.Errorf("step: sequence %d carries %d drafts: verify them with StepDrafts", s.Seq, s.Draft)
		}
	}
	out, err := e.step(ctx, seqs, samplers)
	if out == nil {
		return nil, err
	}
	results := make([]sample.Result, len(seqs))
	for i, r := range out {
		if len(r) > 0 {
			results[i] = r[0]
		}
	}
	return results, err
}

// StepDrafts is Step for a batch whose rows may carry drafted tokens
// (SeqStep.Draft = k > 0: the last k of Tokens). out[i] lists the tokens row
// i produced, each as its sampler produced it: for a row without drafts the
// one sampled token; for a row with drafts, the drafts the sampler accepted,
// then the token sampled after the last accepted one (so 1 to k+1 tokens).
// out and its slices are valid until the next step. Errors are Step's.
//
// Verification samples position by position: the sampler, in the state left
// by the tokens accepted before, samples the position's logits exactly as
// if it were decoding that position alone (mask, penalties, suppression,
// temperature and filters, and its seeded draw for that generated-token
// index); a draft is accepted when the sampled token equals it, and the
// first token that differs ends the row. Greedy, that accepts the longest
// prefix of drafts that are the argmax. With temperature, it is rejection
// sampling with a deterministic draft, whose proposal puts probability 1 on
// draft x: accept x with probability min(1, q(x)/1) = q(x), the target's
// probability of x; on rejection draw from the residual
// norm(max(0, q - δx)), which is q with x removed and renormalised. The
// sampled token is x with probability q(x), and given that it is not x it
// is distributed as q restricted to the other tokens: the same law, drawn
// with the same uniform (one per position). So each emitted token has the
// target's distribution, and a sequence's output for a seed is the one
// decoding without drafts gives from the same logits.
func (e *Engine) StepDrafts(ctx context.Context, seqs []batch.SeqStep, samplers []*sample.Sampler) ([][]sample.Result, error) {
	if !e.VerifiesDrafts() {
		for _, s := range seqs {
			if s.Draft != 0 {
				return nil, fmt.Errorf("step: sequence %d carries %d drafts but backend %s does not compute their logits", s.Seq, s.Draft, e.b.Name())
			}
		}
	}
	return e.step(ctx, seqs, samplers)
}

func (e *Engine) step(ctx context.Context, seqs []batch.SeqStep, samplers []*sample.Sampler) ([][]sample.Result, error) {
	if len(samplers) != len(seqs) {
		return nil, fmt.Errorf("step: %d samplers for %d sequences", len(samplers), len(seqs))
	}
	rows := 0
	hidden := -1 // HiddenSize, looked up at the first row that asks
	for i, s := range seqs {
		if s.Hidden != nil {
			if hidden < 0 {
				hidden = e.HiddenSize()
			}
			if hidden == 0 {
				return nil, fmt.Errorf("step: sequence %d asks for hidden states, which backend %s does not produce", s.Seq, e.b.Name())
			}
			if len(s.Hidden) != len(s.Tokens)*hidden {
				return nil, fmt.Errorf("step: sequence %d: hidden slot has %d entries for %d tokens of width %d", s.Seq, len(s.Hidden), len(s.Tokens), hidden)
			}
		}
		if s.Logits != (samplers[i] != nil) {
			return nil, fmt.Errorf("step: sequence %d: Logits %v but sampler set %v", s.Seq, s.Logits, samplers[i] != nil)
		}
		if s.Draft < 0 || (s.Draft > 0 && (!s.Logits || s.Draft >= len(s.Tokens))) {
			return nil, fmt.Errorf("step: sequence %d: %d drafts among %d tokens (Logits %v)", s.Seq, s.Draft, len(s.Tokens), s.Logits)
		}
		rows += batch.LogitRows(s)
	}
	if len(e.buf) < rows*e.vocab {
		e.buf = make([]float32, rows*e.vocab)
	}
	if cap(e.slots) < len(seqs) {
		e.slots = make([][]float32, len(seqs))
	}
	slots := e.slots[:len(seqs)]
	r := 0
	idx := e.idx[:0]
	for i, s := range seqs {
		slots[i] = nil
		if n := batch.LogitRows(s); n > 0 {
			slots[i] = e.buf[r*e.vocab : (r+n)*e.vocab]
			r += n
			idx = append(idx, i)
		}
	}
	e.idx = idx
	if err := e.b.Forward(ctx, seqs, slots); err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	if cap(e.out) < len(seqs) {
		e.out = make([][]sample.Result, len(seqs))
	}
	out := e.out[:len(seqs)]
	if cap(e.flat) < rows {
		e.flat = make([]sample.Result, rows)
	}
	flat := e.flat[:rows]
	r = 0
	for i, s := range seqs {
		out[i] = flat[r : r : r+batch.LogitRows(s)]
		r += batch.LogitRows(s)
	}
	errs := make([]error, len(seqs))
	sampleOne := func(i int) {
		defer func() {
			if r := recover(); r != nil {
				errs[i] = fmt.Errorf("sampler panic: %v", r)
			}
		}()
		s := seqs[i]
		drafts := s.Tokens[len(s.Tokens)-s.Draft:]
		for j := 0; j <= s.Draft; j++ {
			lg := slots[i][j*e.vocab : (j+1)*e.vocab]
			for _, v := range lg {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					errs[i] = batch.ErrNonFinite
					return
				}
			}
			res := samplers[i].Sample(lg)
			out[i] = append(out[i], res)
			if j == s.Draft || res.Token != drafts[j] {
				return
			}
		}
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
		return out, se
	}
	return out, nil
}
