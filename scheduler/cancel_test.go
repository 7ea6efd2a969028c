package scheduler

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/weft-inference/weft/runtime/batch"
)

// Cancellation in every phase frees every block, and the stream ends once
// with FinishCancelled.
func TestCancelEveryPhase(t *testing.T) {
	for _, tc := range []struct {
		name string
		// promptLen, maxTokens of the cancelled request.
		promptLen, maxTokens int
		// when cancels the request: it gets the step number and how many
		// steps the request has been in; ok says the step is the one.
		when func(step, inSteps int, sampled bool) bool
		// atSubmit cancels the request's context before Submit.
		atSubmit bool
		// waiting: a blocker fills the only slot, so the request waits.
		waiting bool
		// minTokens, maxTokens bound the tokens the request got.
		wantMin, wantMax int
	}{
		{name: "before submit", promptLen: 8, maxTokens: 50, atSubmit: true, wantMax: 1},
		{name: "waiting", promptLen: 8, maxTokens: 50, waiting: true},
		{name: "just admitted", promptLen: 8, maxTokens: 50,
			when: func(step, in int, sampled bool) bool { return in == 1 }, wantMax: 1},
		{name: "prefilling", promptLen: 1000, maxTokens: 50,
			when: func(step, in int, sampled bool) bool { return in == 3 && !sampled }},
		{name: "decoding", promptLen: 8, maxTokens: 50,
			when: func(step, in int, sampled bool) bool { return in == 6 }, wantMin: 5, wantMax: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := testConfig()
				cfg.NumBlocks = 512
				if tc.waiting {
					cfg.MaxSeqs = 1
				}
				var mu sync.Mutex
				var target *Stream
				var in int
				h := startHarness(t, cfg, func(m *fakeModel) {
					m.onStep = func(step int, seqs []batch.SeqStep) {
						mu.Lock()
						defer mu.Unlock()
						if target == nil || tc.when == nil {
							return
						}
						for _, s := range seqs {
							if s.Seq == target.id {
								in++
								if tc.when(step, in, s.Logits) {
									target.Cancel()
								}
							}
						}
					}
				})
				blocker := h.collectAsync(h.submit(Request{Prompt: prompt(1, 8), MaxTokens: 30, IgnoreEOS: true}))
				ctx, cancel := context.WithCancel(context.Background())
				if tc.atSubmit {
					cancel()
				}
				mu.Lock()
				st, err := h.s.Submit(ctx, Request{Prompt: prompt(2, tc.promptLen), MaxTokens: tc.maxTokens, IgnoreEOS: true})
				if err != nil {
					t.Fatal(err)
				}
				target = st
				mu.Unlock()
				if tc.waiting {
					synctest.Wait()
					cancel()
				}
				r := h.collect(st)
				if r.err != nil || r.final == nil || r.final.Reason != FinishCancelled {
					t.Fatalf("result %+v final %+v, want FinishCancelled", r, r.final)
				}
				if n := len(r.tokens); n < tc.wantMin || n > tc.wantMax || n != r.final.CompletionTokens {
					t.Errorf("%d tokens (final says %d), want [%d, %d]", n, r.final.CompletionTokens, tc.wantMin, tc.wantMax)
				}
				synctest.Wait()
				// The cancelled request leaves the batch at the next step.
				mu.Lock()
				if got := len(h.m.stepsOf(st.id)); tc.when != nil && got != in {
					t.Errorf("request ran in %d steps, cancelled during step %d of them", got, in)
				}
				mu.Unlock()
				if tc.waiting && len(h.m.stepsOf(st.id)) != 0 {
					t.Errorf("waiting request ran")
				}
				<-blocker
				synctest.Wait()
				h.idleEmpty()
				cancel()
				h.stop()
			})
		})
	}
}
