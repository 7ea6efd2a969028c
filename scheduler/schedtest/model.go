package schedtest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// Model is the paged fake model. Set the hooks before the first step; the
// zero value is not usable, call NewModel.
type Model struct {
	// Next is the token function over the history read back through the
	// block table; nil means Hash.
	Next func(history []int32) int32
	// Gate, when set, makes every step first take a value from it (or
	// return ctx.Err()); close it to let steps run freely.
	Gate chan struct{}
	// AtGate, when set, is called when a step reaches the Gate, before it
	// waits there: the step before it has been applied (a test that
	// waits for this call knows the scheduler's Stats of that step are
	// published). It must not block.
	AtGate func()
	// OnStep, when set, runs at the start of every step (on the caller's
	// goroutine, after Gate) with the step's number from 1.
	OnStep func(step int, seqs []batch.SeqStep)
	// Fail, when set, is asked after OnStep; a non-nil error is the step's
	// result, and nothing is written to the cache.
	Fail func(step int) error

	// NoDrafts makes VerifiesDrafts false (a backend that cannot verify
	// drafted tokens).
	NoDrafts bool
	// Hidden, when > 0, is HiddenSize: rows with SeqStep.Hidden get, for
	// each token, HiddenOf the history up to it read back through the
	// block table (so a wrong position or block changes the vector).
	Hidden int

	// Windows, when not nil, lays the cache out in layer groups as a
	// backend reports them (batch.KVInfo.Windows): every row must bring
	// one block table per group (SeqStep.Tables) and every token is
	// written through each. The history comes from a group without
	// window (there must be one); each window group must give back the
	// same tokens for every position a query of the row sees. A row whose
	// window groups disagree is recorded as the model's error (see Err)
	// and its tokens are perturbed, so a scheduler that serves wrong K/V
	// to a window group also gets wrong tokens.
	Windows []int

	bs int

	mu    sync.Mutex
	kv    [][]int32
	steps []StepRecord
	err   error
}

// StepRecord is one step as the model saw it, one entry per row.
type StepRecord struct {
	Seqs    []uint64 // SeqStep.Seq
	N       []int    // tokens fed
	Pos     []int    // SeqStep.Pos
	Sampled []bool   // a token was asked for
	Draft   []int    // SeqStep.Draft
}

// NewModel returns a fake with a cache of numBlocks blocks of blockSize
// positions, every position empty (-1).
func NewModel(blockSize, numBlocks int) *Model {
	kv := make([][]int32, numBlocks)
	for i := range kv {
		kv[i] = make([]int32, blockSize)
		for j := range kv[i] {
			kv[i][j] = -1
		}
	}
	return &Model{bs: blockSize, kv: kv}
}

// Hash is the default token function: an FNV-1a hash of the whole history,
// mapped to 1..999, so it never returns 0 (tests use 0 as EOS).
func Hash(history []int32) int32 {
	x := uint64(14695981039346656037)
	for _, t := range history {
		x ^= uint64(uint32(t))
		x *= 1099511628211
	}
	x ^= x >> 29
	return int32(1 + x%999)
}

// Reference returns the n tokens an uninterrupted greedy run of the fake
// with token function next (nil: Hash) generates after prompt.
func Reference(prompt []int32, n int, next func([]int32) int32) []int32 {
	if next == nil {
		next = Hash
	}
	h := slices.Clone(prompt)
	for range n {
		h = append(h, next(h))
	}
	return h[len(prompt):]
}

// Step writes every row's tokens to the cache at their positions through
// the row's block table and, for rows that ask for logits, returns Next of
// the history read back (the samplers are not used: the fake is greedy on
// its own function). A malformed row (no tokens, a block table too short,
// a sampler present exactly when Logits is not) is recorded as the model's
// error (see Err) and gets no token.
func (m *Model) Step(ctx context.Context, seqs []batch.SeqStep, samplers []*sample.Sampler) ([]sample.Result, error) {
	out, err := m.StepDrafts(ctx, seqs, samplers)
	if out == nil {
		return nil, err
	}
	res := make([]sample.Result, len(seqs))
	for i, r := range out {
		if len(r) > 0 {
			res[i] = r[0]
		}
	}
	return res, err
}

// VerifiesDrafts is !NoDrafts.
func (m *Model) VerifiesDrafts() bool { return !m.NoDrafts }

// StepDrafts is Step for rows that may carry drafts (SeqStep.Draft = k):
// every token of the row is written to the cache, then position by
// position Next of the history read back decides the token; a draft equal
// to it is accepted, the first that differs ends the row. out[i] lists
// row i's tokens: the accepted drafts, then Next after them.
func (m *Model) StepDrafts(ctx context.Context, seqs []batch.SeqStep, samplers []*sample.Sampler) ([][]sample.Result, error) {
	if m.Gate != nil {
		if m.AtGate != nil {
			m.AtGate()
		}
		select {
		case <-m.Gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	m.mu.Lock()
	step := len(m.steps) + 1
	var rec StepRecord
	for _, s := range seqs {
		rec.Seqs = append(rec.Seqs, s.Seq)
		rec.N = append(rec.N, len(s.Tokens))
		rec.Pos = append(rec.Pos, s.Pos)
		rec.Sampled = append(rec.Sampled, s.Logits)
		rec.Draft = append(rec.Draft, s.Draft)
	}
	if len(samplers) != len(seqs) {
		m.setErr(fmt.Errorf("step %d: %d samplers for %d rows", step, len(samplers), len(seqs)))
	}
	m.steps = append(m.steps, rec)
	m.mu.Unlock()
	if m.OnStep != nil {
		m.OnStep(step, seqs)
	}
	if m.Fail != nil {
		if err := m.Fail(step); err != nil {
			return nil, err
		}
	}
	next := m.Next
	if next == nil {
		next = Hash
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	res := make([][]sample.Result, len(seqs))
	var hist []int32
	for i, s := range seqs {
		end := s.Pos + len(s.Tokens)
		if s.Draft < 0 || s.Draft >= max(len(s.Tokens), 1) || (s.Draft > 0 && (!s.Logits || m.NoDrafts)) {
			m.setErr(fmt.Errorf("step %d seq %d: %d drafts among %d tokens (Logits %v, NoDrafts %v)", step, s.Seq, s.Draft, len(s.Tokens), s.Logits, m.NoDrafts))
			continue
		}
		tables, err := m.tables(s)
		if len(s.Tokens) == 0 || s.Pos < 0 || err != nil {
			m.setErr(fmt.Errorf("step %d seq %d: %d tokens at %d: %v", step, s.Seq, len(s.Tokens), s.Pos, err))
			continue
		}
		if i < len(samplers) && (samplers[i] != nil) != s.Logits {
			m.setErr(fmt.Errorf("step %d seq %d: Logits %v with sampler %v", step, s.Seq, s.Logits, samplers[i] != nil))
			continue
		}
		if s.Hidden != nil && (m.Hidden == 0 || len(s.Hidden) != len(s.Tokens)*m.Hidden) {
			m.setErr(fmt.Errorf("step %d seq %d: hidden slot of %d values for %d tokens (HiddenSize %d)", step, s.Seq, len(s.Hidden), len(s.Tokens), m.Hidden))
			continue
		}
		for _, t := range tables {
			for j, tok := range s.Tokens {
				p := s.Pos + j
				m.kv[t[p/m.bs]][p%m.bs] = tok
			}
		}
		full := tables[m.fullGroup()]
		hist = hist[:0]
		for p := range end {
			hist = append(hist, m.kv[full[p/m.bs]][p%m.bs])
		}
		perturb := int32(0)
		for g, w := range m.Windows {
			if w <= 0 {
				continue
			}
			for p := max(0, s.Pos-w+1); p < end; p++ {
				if got := m.kv[tables[g][p/m.bs]][p%m.bs]; got != hist[p] {
					m.setErr(fmt.Errorf("step %d seq %d: window group %d reads %d at position %d, the history holds %d", step, s.Seq, g, got, p, hist[p]))
					perturb = 1
				}
			}
		}
		if s.Hidden != nil {
			for j := range s.Tokens {
				copy(s.Hidden[j*m.Hidden:], HiddenOf(hist[:s.Pos+j+1], m.Hidden))
			}
		}
		if !s.Logits {
			continue
		}
		for j := 0; j <= s.Draft; j++ {
			tok := next(hist[:end-s.Draft+j]) + perturb
			res[i] = append(res[i], sample.Result{Token: tok})
			if j == s.Draft || tok != hist[end-s.Draft+j] {
				break
			}
		}
	}
	return res, nil
}

// HiddenSize is Hidden.
func (m *Model) HiddenSize() int { return m.Hidden }

// HiddenOf is the fake's hidden state of the last token of history: width
// values that depend on the whole history.
func HiddenOf(history []int32, width int) []float32 {
	h := make([]float32, width)
	x := uint32(Hash(history))
	for i := range h {
		x = x*1664525 + 1013904223
		h[i] = float32(int32(x>>8)%2001-1000) / 1000
	}
	return h
}

// ReferenceEmbedding is the embedding of prompt the fake gives under
// pooling how: every token's HiddenOf pooled as batch.Pool does.
func ReferenceEmbedding(prompt []int32, width int, how batch.Pooling) []float32 {
	p := batch.NewPool(how, width)
	for i := range prompt {
		p.Add(HiddenOf(prompt[:i+1], width))
	}
	return p.Vector()
}

// fullGroup is the group whose table gives the history: the first without
// window (0 without groups).
func (m *Model) fullGroup() int {
	for g, w := range m.Windows {
		if w <= 0 {
			return g
		}
	}
	return 0
}

// tables returns s's block tables (Blocks alone without groups) after
// checking that they cover its positions with blocks of the cache: every
// row a query of s reads or its tokens are written to.
func (m *Model) tables(s batch.SeqStep) ([][]int32, error) {
	end := s.Pos + len(s.Tokens)
	tables, windows := [][]int32{s.Blocks}, []int{0}
	if m.Windows != nil {
		tables, windows = s.Tables, m.Windows
		if len(s.Tables) != len(m.Windows) {
			return nil, fmt.Errorf("%d block tables for %d groups", len(s.Tables), len(m.Windows))
		}
		if m.Windows[m.fullGroup()] > 0 {
			return nil, fmt.Errorf("no group without window among %v", m.Windows)
		}
	}
	for g, t := range tables {
		if len(t)*m.bs < end {
			return nil, fmt.Errorf("group %d: %d blocks for %d positions", g, len(t), end)
		}
		for r := batch.FirstRow(windows[g], m.bs, s.Pos); r < (end+m.bs-1)/m.bs; r++ {
			if t[r] < 0 || int(t[r]) >= len(m.kv) {
				return nil, fmt.Errorf("group %d: row %d is block %d of %d", g, r, t[r], len(m.kv))
			}
		}
	}
	return tables, nil
}

// setErr keeps the first misuse; m.mu is held.
func (m *Model) setErr(err error) {
	if m.err == nil {
		m.err = err
	}
}

// BlockTokens returns a copy of the tokens the fake cache holds in block
// b (-1 for a position never written).
func (m *Model) BlockTokens(b int32) []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.kv[b])
}

// Err returns the first malformed row the model was given, if any.
func (m *Model) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Steps returns a copy of the steps run so far.
func (m *Model) Steps() []StepRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.steps)
}

// NumSteps is the number of steps run so far.
func (m *Model) NumSteps() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.steps)
}

// StepsOf returns the steps (numbered from 1) whose batch held sequence id.
func (m *Model) StepsOf(id uint64) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for k, r := range m.steps {
		if slices.Contains(r.Seqs, id) {
			out = append(out, k+1)
		}
	}
	return out
}
