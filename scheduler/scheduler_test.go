package scheduler

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/scheduler/schedtest"
)

// The seed's case: answers of 6, 50 and 300 tokens. Continuous batching
// completes the short one after about 6 steps; static batching only when the
// group's longest member ends.
func TestShortAnswerNotHeldByLongOnes(t *testing.T) {
	for _, tc := range []struct {
		batching       string
		minStep, maxSt int // step at which the 6-token answer completes
	}{
		{BatchingContinuous, 6, 7},
		{BatchingStatic, 300, 302},
	} {
		t.Run(tc.batching, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := testConfig()
				cfg.Batching = tc.batching
				h := newHarness(t, cfg, nil)
				lens := []int{6, 50, 300}
				var chans []<-chan result
				var prompts [][]int32
				for i, n := range lens {
					p := prompt(i, 5)
					prompts = append(prompts, p)
					chans = append(chans, h.collectAsync(h.submit(Request{Prompt: p, MaxTokens: n, IgnoreEOS: true})))
				}
				h.run() // all three are queued before the first step
				for i, ch := range chans {
					r := <-ch
					if r.err != nil || r.final == nil {
						t.Fatalf("request %d: err %v final %v", i, r.err, r.final)
					}
					if diff := cmp.Diff(schedtest.Reference(prompts[i], lens[i], nil), r.tokens); diff != "" {
						t.Errorf("request %d tokens (-want +got):\n%s", i, diff)
					}
					if r.final.Reason != FinishLength || r.final.CompletionTokens != lens[i] {
						t.Errorf("request %d: final %+v", i, r.final)
					}
					if i == 0 {
						step := int(r.doneAt / stepDur)
						if step < tc.minStep || step > tc.maxSt {
							t.Errorf("6-token answer complete after %d steps, want [%d, %d]", step, tc.minStep, tc.maxSt)
						}
					}
				}
				synctest.Wait()
				h.idleEmpty()
				h.stop()
			})
		})
	}
}

// A waiting request joins the batch at the very step after a slot frees.
func TestArrivalJoinsNextStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.MaxSeqs = 2
		h := startHarness(t, cfg, nil)
		a := h.submit(Request{Prompt: prompt(1, 6), MaxTokens: 5, IgnoreEOS: true})
		b := h.submit(Request{Prompt: prompt(2, 6), MaxTokens: 40, IgnoreEOS: true})
		c := h.submit(Request{Prompt: prompt(3, 6), MaxTokens: 10, IgnoreEOS: true})
		ra, rb, rc := h.collectAsync(a), h.collectAsync(b), h.collectAsync(c)
		<-ra
		<-rb
		<-rc
		as, cs := h.m.StepsOf(h.id(a)), h.m.StepsOf(h.id(c))
		if len(as) == 0 || len(cs) == 0 {
			t.Fatalf("steps: a %v c %v", as, cs)
		}
		if got, want := cs[0], as[len(as)-1]+1; got != want {
			t.Errorf("third request first ran at step %d, want %d (a's last step %d)", got, want, as[len(as)-1])
		}
		h.stop()
	})
}

// A long prompt is prefilled in chunks while every running stream keeps
// producing one token per step.
func TestChunkedPrefillKeepsDecoding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.BlockSize = 16
		cfg.NumBlocks = 512
		cfg.MaxBatchTokens = 256
		h := startHarness(t, cfg, nil)
		var short []*Stream
		var chans []<-chan result
		for i := range 3 {
			st := h.submit(Request{Prompt: prompt(i, 8), MaxTokens: 100, IgnoreEOS: true})
			short = append(short, st)
			chans = append(chans, h.collectAsync(st))
		}
		time.Sleep(3 * stepDur) // let the three reach decoding
		long := h.submit(Request{Prompt: prompt(9, 4000), MaxTokens: 4, IgnoreEOS: true})
		lr := h.collectAsync(long)
		r := <-lr
		if r.final == nil || r.final.Reason != FinishLength {
			t.Fatalf("long request: %+v", r)
		}
		if diff := cmp.Diff(schedtest.Reference(prompt(9, 4000), 4, nil), r.tokens); diff != "" {
			t.Errorf("long request tokens (-want +got):\n%s", diff)
		}
		ls := h.m.StepsOf(h.id(long))
		steps := h.m.Steps()
		prefillSteps := 0
		for _, k := range ls {
			rec := steps[k-1]
			tot := 0
			for j, id := range rec.Seqs {
				tot += rec.N[j]
				if id == h.id(long) && !rec.Sampled[j] {
					prefillSteps++
				}
			}
			if tot > cfg.MaxBatchTokens {
				t.Errorf("step %d: %d tokens > budget %d", k, tot, cfg.MaxBatchTokens)
			}
			for _, st := range short {
				j := -1
				for x, id := range rec.Seqs {
					if id == h.id(st) {
						j = x
					}
				}
				if j < 0 || rec.N[j] != 1 || !rec.Sampled[j] {
					t.Errorf("step %d: running stream %d did not decode one token", k, h.id(st))
				}
			}
		}
		if min := 4000 / cfg.MaxBatchTokens; prefillSteps < min {
			t.Errorf("prefilled in %d steps, want at least %d chunks", prefillSteps, min)
		}
		for i, ch := range chans {
			if r := <-ch; len(r.tokens) != 100 {
				t.Errorf("short %d: %d tokens", i, len(r.tokens))
			}
		}
		h.stop()
	})
}

// Preempted sequences resume with exactly the tokens of an uninterrupted run.
func TestPreemptionResumesExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.BlockSize = 4
		cfg.NumBlocks = 24 // 96 positions for 6 sequences that want ~50 each
		cfg.MaxSeqs = 6
		cfg.WatermarkBlocks = 1
		h := startHarness(t, cfg, nil)
		var chans []<-chan result
		var prompts [][]int32
		for i := range 6 {
			p := prompt(i+20, 6+i)
			prompts = append(prompts, p)
			chans = append(chans, h.collectAsync(h.submit(Request{Prompt: p, MaxTokens: 40, IgnoreEOS: true, Priority: i % 2})))
		}
		for i, ch := range chans {
			r := <-ch
			want := schedtest.Reference(prompts[i], 40, nil)
			if diff := cmp.Diff(want, r.tokens); diff != "" {
				t.Errorf("request %d tokens (-want +got):\n%s", i, diff)
			}
			if r.text != schedtest.LettersOf(want) {
				t.Errorf("request %d text %q, want %q", i, r.text, schedtest.LettersOf(want))
			}
		}
		if p := h.s.Stats().Preemptions; p == 0 {
			t.Errorf("no preemption happened; the test does not test it")
		}
		synctest.Wait()
		h.idleEmpty()
		h.stop()
	})
}

// A second request sharing a prompt prefix is served from the prefix cache
// and produces the same tokens.
func TestPrefixCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		h := startHarness(t, cfg, nil)
		base := prompt(5, 41) // 10 full blocks of 4 and one more token
		r1 := h.collect(h.submit(Request{Prompt: base, MaxTokens: 8, IgnoreEOS: true}))
		if r1.final.CachedTokens != 0 {
			t.Errorf("first request: %d cached tokens", r1.final.CachedTokens)
		}
		// Same prompt: all full blocks but the one holding the last token.
		same := h.collect(h.submit(Request{Prompt: base, MaxTokens: 8, IgnoreEOS: true}))
		// Next chat turn: the first answer and more text appended.
		turn := append(append(append([]int32{}, base...), r1.tokens...), 7, 8, 9)
		next := h.collect(h.submit(Request{Prompt: turn, MaxTokens: 8, IgnoreEOS: true}))
		// Exactly on a block boundary: the last block must be recomputed.
		edge := base[:40]
		r4 := h.collect(h.submit(Request{Prompt: edge, MaxTokens: 3, IgnoreEOS: true}))
		for _, tc := range []struct {
			name   string
			r      result
			prompt []int32
			n      int
			cached int
		}{
			{"same prompt", same, base, 8, 40},
			{"next turn", next, turn, 8, 48},
			{"block boundary", r4, edge, 3, 36},
		} {
			if got := tc.r.final.CachedTokens; got != tc.cached {
				t.Errorf("%s: CachedTokens %d, want %d", tc.name, got, tc.cached)
			}
			if diff := cmp.Diff(schedtest.Reference(tc.prompt, tc.n, nil), tc.r.tokens); diff != "" {
				t.Errorf("%s tokens (-want +got):\n%s", tc.name, diff)
			}
		}
		synctest.Wait() // the loop publishes Stats after the step that sent Final
		st := h.s.Stats()
		if st.KVBlocksCached == 0 || st.KVBlocksUsed != 0 {
			t.Errorf("stats %+v: want cached blocks and none used", st)
		}
		h.stop()
	})
}

// The scheduler's own cost per step with 256 running sequences and a model
// that does nothing (readers take their events each step, as Recv would).
func BenchmarkSchedulerStep256(b *testing.B) {
	cfg := Config{BlockSize: 16, NumBlocks: 256 * 64, MaxSeqs: 256, MaxBatchTokens: 4096, ContextLen: 1024}
	if err := cfg.validate(); err != nil {
		b.Fatal(err)
	}
	c := newCore(cfg, new(atomicInt64))
	var id uint64
	var seqs []*seq
	add := func() {
		id++
		c.queued.Add(1)
		sq := testSeq(id, Request{Prompt: prompt(int(id), 32), MaxTokens: 1 << 30, IgnoreEOS: true})
		seqs = append(seqs, sq)
		c.submit(sq)
	}
	for range 256 {
		add()
	}
	results := make([]sample.Result, 256)
	now := time.Unix(0, 0)
	// Warm up: admit and prefill everyone.
	for c.stats.Steps < 2 || len(c.running) < 256 {
		rows, _ := c.plan(context.Background(), now)
		c.apply(results[:len(rows)], nil, now)
	}
	b.ResetTimer()
	for i := range b.N {
		rows, _ := c.plan(context.Background(), now)
		for k := range rows {
			results[k].Token = int32(i % 1000)
		}
		c.apply(results[:len(rows)], nil, now)
		for c.live < 256 {
			add()
		}
		// The readers: each takes its event, as Recv would.
		for _, sq := range seqs {
			sq.st.mu.Lock()
			sq.st.pending, sq.st.has = Event{}, false
			sq.st.mu.Unlock()
		}
		if i%256 == 0 {
			seqs = slices.DeleteFunc(seqs, func(sq *seq) bool { return sq.state == seqDone })
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/step")
}
