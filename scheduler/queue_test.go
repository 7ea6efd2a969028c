package scheduler

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// Higher priority first, FCFS within a priority.
func TestQueueOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.MaxSeqs = 1
		h := startHarness(t, cfg, nil)
		blocker := h.submit(Request{Prompt: prompt(0, 4), MaxTokens: 5, IgnoreEOS: true})
		var streams []*Stream
		pris := []int{0, 2, 1, 2, 0, 1}
		for i, p := range pris {
			streams = append(streams, h.submit(Request{Prompt: prompt(i+1, 4), MaxTokens: 2, IgnoreEOS: true, Priority: p}))
		}
		h.collect(blocker)
		first := map[int]int{}
		for i, st := range streams {
			h.collect(st)
			first[i] = h.m.stepsOf(st.id)[0]
		}
		// Expected order: indexes 1, 3 (priority 2), 2, 5 (priority 1), 0, 4.
		order := []int{1, 3, 2, 5, 0, 4}
		for k := 1; k < len(order); k++ {
			if first[order[k]] <= first[order[k-1]] {
				t.Errorf("request %d (priority %d) started at step %d, not after request %d (priority %d) at %d",
					order[k], pris[order[k]], first[order[k]], order[k-1], pris[order[k-1]], first[order[k-1]])
			}
		}
		h.stop()
	})
}

// Submit refuses at once when the waiting queue is full, and a request that
// waited past its QueueTimeout ends with FinishTimeout.
func TestQueueFullAndTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.MaxSeqs = 1
		cfg.MaxWaiting = 2
		h := startHarness(t, cfg, nil)
		running := h.submit(Request{Prompt: prompt(0, 4), MaxTokens: 50, IgnoreEOS: true})
		synctest.Wait() // admitted: it no longer counts as waiting
		a := h.submit(Request{Prompt: prompt(1, 4), MaxTokens: 2, QueueTimeout: 5 * stepDur})
		b := h.submit(Request{Prompt: prompt(2, 4), MaxTokens: 2})
		start := time.Now()
		if _, err := h.s.Submit(context.Background(), Request{Prompt: prompt(3, 4), MaxTokens: 2}); !errors.Is(err, ErrQueueFull) {
			t.Errorf("third waiting request: err %v, want ErrQueueFull", err)
		}
		if time.Since(start) != 0 {
			t.Errorf("Submit took %v to refuse", time.Since(start))
		}
		ra := h.collect(a)
		if ra.final.Reason != FinishTimeout || len(ra.tokens) != 0 {
			t.Errorf("timed out request: %+v", ra.final)
		}
		if w := ra.final.QueueWait; w < 5*stepDur || w > 6*stepDur {
			t.Errorf("QueueWait %v, want about %v", w, 5*stepDur)
		}
		// The slot it held in the queue is free again.
		c := h.submit(Request{Prompt: prompt(4, 4), MaxTokens: 2})
		for _, st := range []*Stream{running, b, c} {
			if r := h.collect(st); r.final.Reason != FinishLength {
				t.Errorf("final %+v", r.final)
			}
		}
		h.stop()
	})
}

func TestSubmitErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.ContextLen = 16
		cfg.VocabSize = 1000
		h := startHarness(t, cfg, nil)
		for _, tc := range []struct {
			name string
			req  Request
			want error
		}{
			{"empty prompt", Request{MaxTokens: 1}, ErrInvalidRequest},
			{"zero max tokens", Request{Prompt: []int32{1}}, ErrInvalidRequest},
			{"negative min tokens", Request{Prompt: []int32{1}, MaxTokens: 1, MinTokens: -1}, ErrInvalidRequest},
			{"bad sampling", Request{Prompt: []int32{1}, MaxTokens: 1, Sampling: sample.Params{TopK: -1}}, ErrInvalidRequest},
			{"token outside vocabulary", Request{Prompt: []int32{1000}, MaxTokens: 1}, ErrInvalidRequest},
			{"prompt fills the context", Request{Prompt: prompt(1, 16), MaxTokens: 1}, ErrPromptTooLong},
		} {
			if _, err := h.s.Submit(context.Background(), tc.req); !errors.Is(err, tc.want) {
				t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
			}
		}
		h.stop()
		if _, err := h.s.Submit(context.Background(), Request{Prompt: []int32{1}, MaxTokens: 1}); !errors.Is(err, ErrClosed) {
			t.Errorf("after Run returned: err %v, want ErrClosed", err)
		}
	})
}

// Drain refuses new requests; accepted ones, waiting or running, finish.
func TestDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.MaxSeqs = 1
		h := startHarness(t, cfg, nil)
		a := h.collectAsync(h.submit(Request{Prompt: prompt(0, 4), MaxTokens: 5, IgnoreEOS: true}))
		b := h.collectAsync(h.submit(Request{Prompt: prompt(1, 4), MaxTokens: 5, IgnoreEOS: true}))
		synctest.Wait()
		h.s.Drain()
		if _, err := h.s.Submit(context.Background(), Request{Prompt: []int32{1}, MaxTokens: 1}); !errors.Is(err, ErrDraining) {
			t.Errorf("err %v, want ErrDraining", err)
		}
		<-h.s.Drained()
		for _, ch := range []<-chan result{a, b} {
			if r := <-ch; r.final.Reason != FinishLength || len(r.tokens) != 5 {
				t.Errorf("final %+v", r.final)
			}
		}
		if !h.s.Stats().Draining {
			t.Errorf("Stats.Draining not set")
		}
		h.stop()
	})
}

// When Run stops, every stream in flight ends with ErrClosed.
func TestRunStopEndsStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.MaxSeqs = 1
		h := startHarness(t, cfg, nil)
		a := h.submit(Request{Prompt: prompt(0, 4), MaxTokens: 500, IgnoreEOS: true})
		b := h.submit(Request{Prompt: prompt(1, 4), MaxTokens: 5, IgnoreEOS: true})
		time.Sleep(5 * stepDur)
		h.stop()
		for _, st := range []*Stream{a, b} {
			r := h.collect(st)
			if r.final == nil || r.final.Reason != FinishError || !errors.Is(r.final.Err, ErrClosed) {
				t.Errorf("final %+v", r.final)
			}
			if _, err := st.Recv(context.Background()); err != io.EOF {
				t.Errorf("Recv after Final: %v, want io.EOF", err)
			}
		}
	})
}

// A failed step fails the sequences in it, not the scheduler.
func TestStepError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		h := startHarness(t, testConfig(), func(m *fakeModel) {
			m.fail = func(step int) error {
				if step == 3 {
					return boom
				}
				return nil
			}
		})
		a := h.collect(h.submit(Request{Prompt: prompt(0, 4), MaxTokens: 10, IgnoreEOS: true}))
		if a.final.Reason != FinishError || !errors.Is(a.final.Err, boom) || len(a.tokens) != 2 {
			t.Errorf("final %+v after %d tokens", a.final, len(a.tokens))
		}
		b := h.collect(h.submit(Request{Prompt: prompt(1, 4), MaxTokens: 3, IgnoreEOS: true}))
		if b.final.Reason != FinishLength {
			t.Errorf("next request: %+v", b.final)
		}
		h.stop()
	})
}

type gate struct {
	mu sync.Mutex
	ok bool
}

func (g *gate) AdmitOK() (bool, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ok {
		return true, ""
	}
	return false, "gpu memory low"
}

func (g *gate) set(ok bool) {
	g.mu.Lock()
	g.ok = ok
	g.mu.Unlock()
}

// A Capacity that says no pauses admission; nobody fails, and Stats says why.
func TestCapacityPausesAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		g := &gate{}
		cfg.Capacity = g
		h := startHarness(t, cfg, nil)
		ch := h.collectAsync(h.submit(Request{Prompt: prompt(0, 6), MaxTokens: 3, IgnoreEOS: true}))
		time.Sleep(10 * stepDur)
		st := h.s.Stats()
		want := Stats{Waiting: 1, AdmissionPaused: true, AdmissionPausedReason: "gpu memory low"}
		got := Stats{Waiting: st.Waiting, Running: st.Running, AdmissionPaused: st.AdmissionPaused, AdmissionPausedReason: st.AdmissionPausedReason}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stats while paused (-want +got):\n%s", diff)
		}
		g.set(true)
		if r := <-ch; r.final.Reason != FinishLength {
			t.Errorf("final %+v", r.final)
		}
		if st := h.s.Stats(); st.AdmissionPaused {
			t.Errorf("still paused: %+v", st)
		}
		h.stop()
	})
}

// Static batching: a group runs to its longest member; arrivals and freed
// slots wait for the next group; early answers are delivered at group end.
func TestStaticGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Batching = BatchingStatic
		cfg.BatchSize = 2
		var mu sync.Mutex
		var sizes []int
		h := newHarness(t, cfg, func(m *fakeModel) {
			m.onStep = func(step int, seqs []batch.SeqStep) {
				mu.Lock()
				sizes = append(sizes, len(seqs))
				mu.Unlock()
			}
		})
		a := h.collectAsync(h.submit(Request{Prompt: prompt(0, 6), MaxTokens: 3, IgnoreEOS: true}))
		b := h.collectAsync(h.submit(Request{Prompt: prompt(1, 6), MaxTokens: 20, IgnoreEOS: true}))
		h.run()
		time.Sleep(2 * stepDur)
		c := h.submit(Request{Prompt: prompt(2, 6), MaxTokens: 2, IgnoreEOS: true})
		ra, rb := <-a, <-b
		if ra.doneAt != rb.doneAt {
			t.Errorf("short member delivered at %v, group ended at %v", ra.doneAt, rb.doneAt)
		}
		rc := h.collect(c)
		cs := h.m.stepsOf(c.id)
		if got, want := cs[0], 21; got != want {
			t.Errorf("late arrival first ran at step %d, want %d (after the 20-step group)", got, want)
		}
		for i, r := range []result{ra, rb, rc} {
			if r.final.Reason != FinishLength {
				t.Errorf("request %d: %+v", i, r.final)
			}
		}
		mu.Lock()
		for k, n := range sizes[:20] {
			want := 2 // a finished after 3 steps; its row is padding
			if n != want {
				t.Errorf("step %d: batch of %d, want %d", k+1, n, want)
			}
		}
		mu.Unlock()
		h.stop()
	})
}

// A sampling failure of one sequence (batch.StepErrors) fails only it.
func TestStepErrorOneSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := errors.New("non-finite")
		var mu sync.Mutex
		var victim uint64
		h := newHarness(t, testConfig(), nil)
		inner := h.m
		wrap := &failOne{fakeModel: inner, victim: func() uint64 { mu.Lock(); defer mu.Unlock(); return victim }, err: bad}
		h.s.model = wrap
		a := h.submit(Request{Prompt: prompt(0, 4), MaxTokens: 10, IgnoreEOS: true})
		b := h.submit(Request{Prompt: prompt(1, 4), MaxTokens: 10, IgnoreEOS: true})
		mu.Lock()
		victim = b.id
		mu.Unlock()
		h.run()
		ra, rb := h.collect(a), h.collect(b)
		if ra.final.Reason != FinishLength || len(ra.tokens) != 10 {
			t.Errorf("healthy sequence: %+v", ra.final)
		}
		if rb.final.Reason != FinishError || !errors.Is(rb.final.Err, bad) || len(rb.tokens) != 0 {
			t.Errorf("failed sequence: %+v with %d tokens", rb.final, len(rb.tokens))
		}
		h.stop()
	})
}

// failOne makes the fake fail sampling for one sequence.
type failOne struct {
	*fakeModel
	victim func() uint64
	err    error
}

func (f *failOne) Step(ctx context.Context, seqs []batch.SeqStep, samplers []*sample.Sampler) ([]sample.Result, error) {
	res, err := f.fakeModel.Step(ctx, seqs, samplers)
	if err != nil {
		return res, err
	}
	var errs batch.StepErrors
	for i, s := range seqs {
		if s.Seq == f.victim() && s.Logits {
			errs = append(errs, batch.SeqError{Index: i, Seq: s.Seq, Err: f.err})
		}
	}
	if errs != nil {
		return res, errs
	}
	return res, nil
}
