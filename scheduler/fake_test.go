package scheduler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/scheduler/schedtest"
)

// stepDur is how long a step takes on the harness's clock: the harness
// makes every step sleep it (fake time inside synctest bubbles), so the
// tests can read queue waits and delivery times in steps.
const stepDur = 10 * time.Millisecond

var _ Model = (*schedtest.Model)(nil)

// newFakeModel is the paged fake (schedtest.Model) over cfg's pool.
func newFakeModel(cfg Config) *schedtest.Model {
	m := schedtest.NewModel(cfg.BlockSize, cfg.NumBlocks)
	m.Windows = cfg.KVWindows
	return m
}

// harness runs a scheduler inside a synctest bubble and checks the core's
// invariants after every step.
type harness struct {
	t       *testing.T
	s       *Scheduler
	m       *schedtest.Model
	cancel  context.CancelFunc
	runErr  chan error
	start   time.Time
	run     func()
	started bool
	stopped bool
	ids     map[*Stream]uint64 // sequence ids of the streams h.submit made
}

func testConfig() Config {
	return Config{BlockSize: 4, NumBlocks: 256, MaxSeqs: 8, MaxBatchTokens: 64, NewDecoder: func() TextDecoder { return schedtest.Letters{} },
		IsEOG: func(t int32) bool { return t == 0 }}
}

// newHarness makes the scheduler; h.run starts its loop (tests that need
// several requests queued before the first step submit them first).
func newHarness(t *testing.T, cfg Config, tweak func(*schedtest.Model)) *harness {
	t.Helper()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	m := newFakeModel(cfg)
	if tweak != nil {
		tweak(m)
	}
	// The step clock runs after the test's own hook, so what the hook
	// starts (a cancellation) reaches the loop before the step ends.
	onStep := m.OnStep
	m.OnStep = func(step int, seqs []batch.SeqStep) {
		if onStep != nil {
			onStep(step, seqs)
		}
		time.Sleep(stepDur)
	}
	s, err := New(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	s.afterStep = func(c *core) {
		if err := c.check(); err != nil {
			t.Errorf("after step %d: %v", c.stats.Steps, err)
		}
		if err := checkCachedKV(c, m); err != nil {
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
func startHarness(t *testing.T, cfg Config, tweak func(*schedtest.Model)) *harness {
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
	if err := h.m.Err(); err != nil {
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
	if h.ids == nil {
		h.ids = map[*Stream]uint64{}
	}
	// Ids count submissions from 1; the tests submit from one goroutine.
	h.ids[st] = h.s.nextID.Load()
	return st
}

// id is the sequence id (SeqStep.Seq) of a stream h.submit made.
func (h *harness) id(st *Stream) uint64 { return h.ids[st] }

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

// checkCachedKV checks that every block registered in the prefix cache
// holds, in the fake's cache, exactly the tokens it is registered under:
// the prefix cache never serves K/V that were not computed for those
// tokens (such as a speculative row's rejected drafts).
func checkCachedKV(c *core, m *schedtest.Model) error {
	p := c.pool
	for b := range p.total() {
		if !p.hashed[b] {
			continue
		}
		if got := m.BlockTokens(int32(b)); !slices.Equal(got, p.toks[b]) {
			return fmt.Errorf("block %d registered under %v holds %v", b, p.toks[b], got)
		}
	}
	return nil
}
