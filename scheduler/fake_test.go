package scheduler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

const stepDur = 10 * time.Millisecond

var _ Model = (*fakeModel)(nil)

// fakeModel is a pure-Go model: it keeps a fake KV cache (the token at each
// position of each block) and samples the next token as a hash of the whole
// history it reads back through the block table. A scheduler that feeds
// wrong positions, wrong blocks, or reuses a wrong prefix changes the
// output.
type fakeModel struct {
	bs    int
	kv    [][]int32
	vocab int32
	// next, when set, replaces the hash: it sees the history read back.
	next func(history []int32) int32
	// onStep, when set, runs at the start of every step (the loop
	// goroutine) with the step's index from 1.
	onStep func(step int, seqs []batch.SeqStep)
	fail   func(step int) error

	mu    sync.Mutex
	steps []stepRec
	err   error
}

// stepRec records one step: per sequence, tokens fed and whether it sampled.
type stepRec struct {
	seqs    []uint64
	n       []int
	sampled []bool
}

func newFakeModel(cfg Config) *fakeModel {
	kv := make([][]int32, cfg.NumBlocks)
	for i := range kv {
		kv[i] = make([]int32, cfg.BlockSize)
		for j := range kv[i] {
			kv[i][j] = -1
		}
	}
	return &fakeModel{bs: cfg.BlockSize, kv: kv, vocab: 1000}
}

// refNext is the fake's token function on a plain history (no KV): the
// reference an uninterrupted run produces.
func refNext(h []int32) int32 {
	x := uint64(14695981039346656037)
	for _, t := range h {
		x ^= uint64(uint32(t))
		x *= 1099511628211
	}
	x ^= x >> 29
	return int32(1 + x%999) // 1..999: never 0, the fake EOS
}

// reference returns the n tokens an uninterrupted greedy run of the fake
// generates after prompt.
func reference(prompt []int32, n int, next func([]int32) int32) []int32 {
	if next == nil {
		next = refNext
	}
	h := slices.Clone(prompt)
	for range n {
		h = append(h, next(h))
	}
	return h[len(prompt):]
}

func (f *fakeModel) Step(ctx context.Context, seqs []batch.SeqStep, samplers []*sample.Sampler) ([]sample.Result, error) {
	f.mu.Lock()
	step := len(f.steps) + 1
	rec := stepRec{}
	for _, s := range seqs {
		rec.seqs = append(rec.seqs, s.Seq)
		rec.n = append(rec.n, len(s.Tokens))
		rec.sampled = append(rec.sampled, s.Logits)
	}
	f.steps = append(f.steps, rec)
	f.mu.Unlock()
	if f.onStep != nil {
		f.onStep(step, seqs)
	}
	time.Sleep(stepDur) // fake time inside synctest bubbles
	if f.fail != nil {
		if err := f.fail(step); err != nil {
			return nil, err
		}
	}
	res := make([]sample.Result, len(seqs))
	var hist []int32
	for i, s := range seqs {
		end := s.Pos + len(s.Tokens)
		if len(s.Tokens) == 0 || len(s.Blocks)*f.bs < end {
			f.setErr(fmt.Errorf("step %d seq %d: %d tokens at %d, %d blocks", step, s.Seq, len(s.Tokens), s.Pos, len(s.Blocks)))
			continue
		}
		for j, t := range s.Tokens {
			p := s.Pos + j
			f.kv[s.Blocks[p/f.bs]][p%f.bs] = t
		}
		if !s.Logits {
			continue
		}
		hist = hist[:0]
		for p := range end {
			hist = append(hist, f.kv[s.Blocks[p/f.bs]][p%f.bs])
		}
		if f.next != nil {
			res[i].Token = f.next(hist)
		} else {
			res[i].Token = refNext(hist)
		}
	}
	return res, nil
}

func (f *fakeModel) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

// stepsOf returns the steps (from 1) in which seq id was in the batch.
func (f *fakeModel) stepsOf(id uint64) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for k, r := range f.steps {
		if slices.Contains(r.seqs, id) {
			out = append(out, k+1)
		}
	}
	return out
}

func (f *fakeModel) numSteps() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.steps)
}

// letters decodes token t as one letter, 'a'+t%26.
type letters struct{}

func (letters) Add(id int32) string { return string(rune('a' + id%26)) }
func (letters) Flush() string       { return "" }

// harness runs a scheduler inside a synctest bubble and checks the core's
// invariants after every step.
type harness struct {
	t       *testing.T
	s       *Scheduler
	m       *fakeModel
	cancel  context.CancelFunc
	runErr  chan error
	start   time.Time
	run     func()
	started bool
	stopped bool
}

func testConfig() Config {
	return Config{BlockSize: 4, NumBlocks: 256, MaxSeqs: 8, MaxBatchTokens: 64, NewDecoder: func() TextDecoder { return letters{} },
		IsEOG: func(t int32) bool { return t == 0 }}
}

// newHarness makes the scheduler; h.run starts its loop (tests that need
// several requests queued before the first step submit them first).
func newHarness(t *testing.T, cfg Config, tweak func(*fakeModel)) *harness {
	t.Helper()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	m := newFakeModel(cfg)
	if tweak != nil {
		tweak(m)
	}
	s, err := New(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	s.afterStep = func(c *core) {
		if err := c.check(); err != nil {
			t.Errorf("after step %d: %v", c.stats.Steps, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, s: s, m: m, cancel: cancel, runErr: make(chan error, 1), start: time.Now()}
	h.run = func() {
		h.started = true
		go func() { h.runErr <- s.Run(ctx) }()
	}
	t.Cleanup(func() {
		if !h.stopped {
			h.stop()
		}
	})
	return h
}

// startHarness is newHarness with Run started.
func startHarness(t *testing.T, cfg Config, tweak func(*fakeModel)) *harness {
	t.Helper()
	h := newHarness(t, cfg, tweak)
	h.run()
	return h
}

// stop ends Run and checks that nothing leaked.
func (h *harness) stop() {
	h.t.Helper()
	h.stopped = true
	h.cancel()
	if !h.started {
		return
	}
	if err := <-h.runErr; !errors.Is(err, context.Canceled) {
		h.t.Errorf("Run returned %v, want context.Canceled", err)
	}
	if err := h.s.core.check(); err != nil {
		h.t.Errorf("after stop: %v", err)
	}
	if u := h.s.core.pool.used; u != 0 {
		h.t.Errorf("%d KV blocks still used after stop", u)
	}
	if err := h.m.err; err != nil {
		h.t.Errorf("fake model: %v", err)
	}
}

// idle waits until the loop has nothing left and checks the ledger holds no
// used block.
func (h *harness) idleEmpty() {
	h.t.Helper()
	st := h.s.Stats()
	if st.Running != 0 || st.Waiting != 0 || st.KVBlocksUsed != 0 {
		h.t.Errorf("not empty: %+v", st)
	}
}

func (h *harness) submit(r Request) *Stream {
	h.t.Helper()
	st, err := h.s.Submit(context.Background(), r)
	if err != nil {
		h.t.Fatalf("Submit: %v", err)
	}
	return st
}

// result is everything one stream delivered.
type result struct {
	tokens []int32
	text   string
	final  *Final
	doneAt time.Duration // fake time when Final arrived, since the harness started
	events int
	err    error
}

// collect reads st to the end.
func (h *harness) collect(st *Stream) result {
	var r result
	for {
		ev, err := st.Recv(context.Background())
		if err == io.EOF {
			return r
		}
		if err != nil {
			r.err = err
			return r
		}
		if r.final != nil {
			r.err = errors.New("event after Final")
			return r
		}
		r.events++
		for _, t := range ev.Tokens {
			r.tokens = append(r.tokens, t.ID)
		}
		r.text += ev.Text
		if ev.Final != nil {
			r.final = ev.Final
			r.doneAt = time.Since(h.start)
		}
	}
}

// collectAsync reads st in its own goroutine.
func (h *harness) collectAsync(st *Stream) <-chan result {
	ch := make(chan result, 1)
	go func() { ch <- h.collect(st) }()
	return ch
}

func prompt(seed, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(1 + (seed*7919+i*104729)%997)
	}
	return p
}

func lettersOf(toks []int32) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteString(letters{}.Add(t))
	}
	return b.String()
}

type atomicInt64 = atomic.Int64

// testSeq builds a sequence as Submit does, without the cancellation
// plumbing.
func testSeq(id uint64, r Request) *seq {
	sq := &seq{
		id:        id,
		req:       r,
		st:        newStream(func() {}),
		stopAfter: func() bool { return true },
		tokens:    slices.Clone(r.Prompt),
		promptLen: len(r.Prompt),
		sampler:   newSampler(r.Sampling, r.Prompt),
	}
	return sq
}
