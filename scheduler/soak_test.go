package scheduler

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weft-inference/weft/scheduler/schedtest"
)

// soakNext is the fake's token function with an EOS (0) now and then.
func soakNext(h []int32) int32 {
	t := schedtest.Hash(h)
	if t%37 == 0 {
		return 0
	}
	return t
}

// Thousands of requests with random lengths, priorities, timeouts and
// cancellations on a small KV pool: the invariants hold after every step,
// every request ends exactly once with the tokens the fake model's
// uninterrupted run gives, and nothing leaks (synctest fails on goroutines
// left behind).
//
// The speculative variant runs continuous batching with n-gram drafts
// over a token function that often repeats the history, so drafts are
// accepted, rejected, cut by stop strings and lengths, preempted and
// cancelled mid-run; the tokens must still be the uninterrupted run's.
//
// The window variants lay the pool out in layer groups, two with a
// sliding window of 6 positions and one without (Config.KVWindows): the
// fake checks at every step that each window group reads back the history
// over the window of every query, and the checker that a window group
// holds no block that slid out of its window.
func TestSoak(t *testing.T) {
	for _, batching := range []string{BatchingContinuous, BatchingStatic, "spec", "window", "window-spec"} {
		t.Run(batching, func(t *testing.T) {
			n := 2000
			if batching == BatchingStatic {
				n = 400
			}
			synctest.Test(t, func(t *testing.T) { soak(t, batching, n) })
		})
	}
}

// specSoakNext repeats the token 5 back most of the time (so n-gram
// drafts are often right), else hashes, with an EOS now and then.
func specSoakNext(h []int32) int32 {
	t := schedtest.Hash(h)
	switch {
	case t%37 == 0:
		return 0
	case t%4 != 0 && len(h) >= 5:
		return h[len(h)-5]
	}
	return t
}

func soak(t *testing.T, batching string, n int) {
	cfg := testConfig()
	next := soakNext
	spec := batching == "spec" || batching == "window-spec"
	window := batching == "window" || batching == "window-spec"
	if window {
		batching = BatchingContinuous
	}
	if spec {
		batching = BatchingContinuous
		cfg.Spec = SpecConfig{Source: SpecNgram, MaxStepTokens: 32}
		next = specSoakNext
	}
	cfg.Batching = batching
	cfg.BlockSize = 4
	cfg.NumBlocks = 40
	cfg.ContextLen = 96
	cfg.MaxSeqs = 8
	cfg.MaxBatchTokens = 32
	cfg.MaxWaiting = 48
	cfg.WatermarkBlocks = 1
	if window {
		// Three groups: a row takes three blocks, a window group holds at
		// most batch.WindowRows(6, 4) = 3 of a sequence.
		cfg.KVWindows = []int{6, 0, 6}
		cfg.NumBlocks = 80
	}
	h := startHarness(t, cfg, func(m *schedtest.Model) { m.Next = next })
	rng := rand.New(rand.NewPCG(1, 2))

	type outcome struct {
		req    Request
		r      result
		cancel bool
	}
	var mu sync.Mutex
	var outs []outcome
	var wg sync.WaitGroup
	full, submitted := 0, 0
	for i := range n {
		time.Sleep(time.Duration(rng.IntN(int(5 * stepDur))))
		// A shared stem now and then, so the prefix cache gets hits.
		var p []int32
		if rng.IntN(4) == 0 {
			p = append(prompt(0, 4*(1+rng.IntN(4))), prompt(i, 1+rng.IntN(8))...)
		} else {
			p = prompt(i, 1+rng.IntN(60))
		}
		req := Request{
			Prompt:    p,
			MaxTokens: 1 + rng.IntN(40),
			Priority:  rng.IntN(3),
			IgnoreEOS: rng.IntN(2) == 0,
		}
		if rng.IntN(6) == 0 {
			req.QueueTimeout = time.Duration(rng.IntN(int(20 * stepDur)))
		}
		if rng.IntN(5) == 0 {
			req.StopStrings = []string{"ab", "q"}
		}
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		cancelled := rng.IntN(5) == 0
		if cancelled {
			ctx, cancel = context.WithTimeout(context.Background(), time.Duration(rng.IntN(int(30*stepDur))))
		}
		st, err := h.s.Submit(ctx, req)
		if errors.Is(err, ErrQueueFull) {
			full++
			cancel()
			continue
		}
		if err != nil {
			t.Fatalf("Submit: %v", err)
		}
		submitted++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			r := h.collect(st)
			if rng := r; rng.final == nil {
				t.Errorf("stream ended without Final: %v", r.err)
			}
			mu.Lock()
			outs = append(outs, outcome{req, r, cancelled})
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(outs) != submitted {
		t.Fatalf("%d outcomes for %d submitted", len(outs), submitted)
	}
	reasons := map[FinishReason]int{}
	for _, o := range outs {
		f := o.r.final
		if f == nil {
			continue
		}
		reasons[f.Reason]++
		want := schedtest.Reference(o.req.Prompt, len(o.r.tokens), next)
		if diff := cmp.Diff(want, o.r.tokens, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("tokens differ from an uninterrupted run (-want +got):\n%s", diff)
		}
		if f.CompletionTokens != len(o.r.tokens) || f.PromptTokens != len(o.req.Prompt) {
			t.Errorf("final %+v for %d tokens", f, len(o.r.tokens))
		}
		limit := min(o.req.MaxTokens, cfg.ContextLen-len(o.req.Prompt))
		eos := slices.Index(want, 0)
		switch f.Reason {
		case FinishLength:
			if len(o.r.tokens) != limit {
				t.Errorf("FinishLength after %d tokens, limit %d", len(o.r.tokens), limit)
			}
		case FinishEOS:
			if o.req.IgnoreEOS || eos != len(want)-1 {
				t.Errorf("FinishEOS with IgnoreEOS %v at %d of %v", o.req.IgnoreEOS, eos, want)
			}
		case FinishStopSequence:
			if len(o.req.StopStrings) == 0 {
				t.Errorf("FinishStopSequence without stop strings")
			}
		case FinishCancelled:
			if !o.cancel {
				t.Errorf("FinishCancelled for a request nobody cancelled")
			}
		case FinishTimeout:
			if o.req.QueueTimeout == 0 || len(o.r.tokens) != 0 {
				t.Errorf("FinishTimeout: timeout %v, %d tokens", o.req.QueueTimeout, len(o.r.tokens))
			}
		default:
			t.Errorf("unexpected final %+v", f)
		}
		if len(o.req.StopStrings) == 0 && f.Reason != FinishEOS && o.r.text != schedtest.LettersOf(o.r.tokens) {
			t.Errorf("text %q for tokens %v", o.r.text, o.r.tokens)
		}
	}
	synctest.Wait()
	st := h.s.Stats()
	t.Logf("%d submitted, %d queue-full, %d steps, %d preemptions, %d padding tokens, reasons %v",
		submitted, full, st.Steps, st.Preemptions, st.PaddingTokens, reasons)
	gen := 0
	for _, o := range outs {
		gen += len(o.r.tokens)
	}
	if st.GenerationTokens != uint64(gen) {
		t.Errorf("GenerationTokens %d, streams got %d tokens", st.GenerationTokens, gen)
	}
	if (batching == BatchingStatic) != (st.PaddingTokens > 0) {
		t.Errorf("%s batching computed %d padding tokens", batching, st.PaddingTokens)
	}
	if batching == BatchingContinuous && st.Preemptions == 0 {
		t.Errorf("no preemption in the soak")
	}
	if spec {
		t.Logf("drafted %d tokens, accepted %d", st.SpecDraftTokens, st.SpecAcceptedTokens)
		if st.SpecAcceptedTokens == 0 || st.SpecAcceptedTokens == st.SpecDraftTokens {
			t.Errorf("drafted %d tokens, accepted %d: the soak misses acceptance or rejection", st.SpecDraftTokens, st.SpecAcceptedTokens)
		}
	} else if st.SpecDraftTokens != 0 {
		t.Errorf("drafted %d tokens with speculation off", st.SpecDraftTokens)
	}
	for _, r := range []FinishReason{FinishLength, FinishCancelled, FinishTimeout, FinishEOS, FinishStopSequence} {
		if reasons[r] == 0 {
			t.Errorf("no request ended with reason %d: the soak misses a path", r)
		}
	}
	synctest.Wait()
	h.idleEmpty()
	h.stop()
}
