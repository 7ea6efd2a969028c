package scheduler

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/scheduler/schedtest"
)

// coreRig drives the synchronous core by hand: plan, the fake model, apply,
// check; no Run loop.
type coreRig struct {
	t   *testing.T
	c   *core
	m   *schedtest.Model
	now time.Time
}

func newCoreRig(t *testing.T, cfg Config) *coreRig {
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	return &coreRig{t: t, c: newCore(cfg, new(atomicInt64)), m: newFakeModel(cfg), now: time.Unix(0, 0)}
}

func (r *coreRig) add(id uint64, req Request) *seq {
	sq := testSeq(id, req)
	r.c.queued.Add(1)
	r.c.submit(sq)
	return sq
}

// step runs one step and returns the ids in the batch.
func (r *coreRig) step() []uint64 {
	r.t.Helper()
	seqs, samplers := r.c.plan(context.Background(), r.now)
	var ids []uint64
	for _, s := range seqs {
		ids = append(ids, s.Seq)
	}
	if len(seqs) > 0 {
		res, err := r.m.Step(context.Background(), seqs, samplers)
		r.c.apply(res, err, r.now)
	}
	if err := r.c.check(); err != nil {
		r.t.Fatalf("after step: %v", err)
	}
	return ids
}

func ids(list []*seq) []uint64 {
	var out []uint64
	for _, sq := range list {
		out = append(out, sq.id)
	}
	return out
}

// The victim is the lowest-priority, most recently admitted sequence; it is
// not readmitted in the step that preempted it, and all resume exactly.
func TestCorePreemptionOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{BlockSize: 2, NumBlocks: 6, MaxSeqs: 8, MaxBatchTokens: 64}
		r := newCoreRig(t, cfg)
		r.c.cfg.WatermarkBlocks = 0
		a := r.add(1, Request{Prompt: prompt(1, 3), MaxTokens: 6, IgnoreEOS: true})
		b := r.add(2, Request{Prompt: prompt(2, 3), MaxTokens: 6, IgnoreEOS: true, Priority: 1})
		c := r.add(3, Request{Prompt: prompt(3, 3), MaxTokens: 6, IgnoreEOS: true})
		type snap struct {
			Batch, Running, Waiting []uint64
			Preemptions             uint64
		}
		var got []snap
		for range 12 {
			batch := r.step()
			got = append(got, snap{batch, ids(r.c.running), ids(r.c.waiting), r.c.stats.Preemptions})
			if r.c.live == 0 {
				break
			}
		}
		want := []snap{
			// All three fit: 2 blocks each. Order: priority, then FCFS.
			{Batch: []uint64{2, 1, 3}, Running: []uint64{2, 1, 3}},
			{Batch: []uint64{2, 1, 3}, Running: []uint64{2, 1, 3}},
			// Position 5 needs a third block: c (priority 0, last admitted) goes.
			{Batch: []uint64{2, 1}, Running: []uint64{2, 1}, Waiting: []uint64{3}, Preemptions: 1},
			{Batch: []uint64{2, 1}, Running: []uint64{2, 1}, Waiting: []uint64{3}, Preemptions: 1},
			// Position 7 needs a fourth block: a goes; it waits ahead of c.
			{Batch: []uint64{2}, Running: []uint64{2}, Waiting: []uint64{1, 3}, Preemptions: 2},
			// b ends (6 tokens); a waits for blocks.
			{Batch: []uint64{2}, Running: nil, Waiting: []uint64{1, 3}, Preemptions: 2},
			// a resumes (8 tokens, 4 blocks); c (5 tokens, 3 blocks) must wait.
			{Batch: []uint64{1}, Running: []uint64{1}, Waiting: []uint64{3}, Preemptions: 2},
		}
		if diff := cmp.Diff(want, got[:min(len(got), len(want))]); diff != "" {
			t.Errorf("trace (-want +got):\n%s", diff)
		}
		for _, sq := range []*seq{a, b, c} {
			if diff := cmp.Diff(schedtest.Reference(sq.req.Prompt, 6, nil), sq.tokens[sq.promptLen:]); diff != "" {
				t.Errorf("seq %d tokens (-want +got):\n%s", sq.id, diff)
			}
			if sq.state != seqDone {
				t.Errorf("seq %d not done", sq.id)
			}
		}
		if r.c.pool.used != 0 {
			t.Errorf("%d blocks used at the end", r.c.pool.used)
		}
	})
}

// A preempted sequence is not readmitted in the step that preempted it,
// even when the blocks it gave back would let its first chunk in.
func TestCoreNoReadmitSameStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{BlockSize: 2, NumBlocks: 4, MaxSeqs: 8, MaxBatchTokens: 3, DisablePrefixCache: true}
		r := newCoreRig(t, cfg)
		r.c.cfg.WatermarkBlocks = 0
		a := r.add(1, Request{Prompt: prompt(1, 3), MaxTokens: 6, IgnoreEOS: true, Priority: 1})
		b := r.add(2, Request{Prompt: prompt(2, 1), MaxTokens: 4, IgnoreEOS: true})
		var got [][]uint64
		for range 4 {
			got = append(got, r.step())
		}
		// Step 4: b cannot grow and, being last, preempts itself; the block
		// it frees would fit its first chunk, but it must wait.
		want := [][]uint64{{1}, {1, 2}, {1, 2}, {1}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]uint64{2}, ids(r.c.waiting)); diff != "" {
			t.Errorf("waiting after the preemption (-want +got):\n%s", diff)
		}
		for r.c.live > 0 {
			r.step()
		}
		for _, sq := range []*seq{a, b} {
			n := min(sq.req.MaxTokens, 8-sq.promptLen) // the context is the pool: 8 positions
			if diff := cmp.Diff(schedtest.Reference(sq.req.Prompt, n, nil), sq.tokens[sq.promptLen:]); diff != "" {
				t.Errorf("seq %d tokens (-want +got):\n%s", sq.id, diff)
			}
		}
	})
}

// Admission leaves WatermarkBlocks free while others run, and ignores the
// watermark when nothing runs (so a request that needs the whole pool gets it).
func TestCoreWatermark(t *testing.T) {
	for _, tc := range []struct {
		name      string
		running   bool // a 4-token request runs first (2 blocks)
		promptLen int  // of the waiting one
		admitted  bool
	}{
		{"fits above the watermark", true, 8, true},   // 4 blocks + 2 kept <= 6 free
		{"would eat the watermark", true, 9, false},   // 5 blocks + 2 kept > 6 free
		{"nothing runs: whole pool", false, 15, true}, // 8 blocks, no watermark
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := Config{BlockSize: 2, NumBlocks: 8, MaxSeqs: 8, MaxBatchTokens: 64, WatermarkBlocks: 2}
				r := newCoreRig(t, cfg)
				if tc.running {
					r.add(1, Request{Prompt: prompt(1, 3), MaxTokens: 50, IgnoreEOS: true})
					r.step()
				}
				sq := r.add(2, Request{Prompt: prompt(2, tc.promptLen), MaxTokens: 1, IgnoreEOS: true})
				r.step()
				if got := sq.admitted; got != tc.admitted {
					t.Errorf("admitted %v, want %v (free %d)", got, tc.admitted, r.c.pool.available())
				}
			})
		})
	}
}

// The per-step counters split decode tokens from prompt chunks.
func TestCoreStepStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{BlockSize: 4, NumBlocks: 64, MaxSeqs: 8, MaxBatchTokens: 20}
		r := newCoreRig(t, cfg)
		r.add(1, Request{Prompt: prompt(1, 5), MaxTokens: 9, IgnoreEOS: true})
		r.add(2, Request{Prompt: prompt(2, 5), MaxTokens: 9, IgnoreEOS: true})
		r.step() // both prompts: 10 tokens
		r.add(3, Request{Prompt: prompt(3, 40), MaxTokens: 9, IgnoreEOS: true})
		r.step() // 2 decode tokens + 18 of the long prompt
		type counters struct{ Steps, Batch, Prefill, Decode, Prompt, Gen, Running, Waiting, Used int }
		st := r.c.snapshot(false)
		got := counters{int(st.Steps), st.LastBatchTokens, st.LastPrefillTok, st.LastDecodeTok,
			int(st.PromptTokens), int(st.GenerationTokens), st.Running, st.Waiting, st.KVBlocksUsed}
		// Blocks: 2 each for the short ones (6 positions), 5 for 18 of 40.
		want := counters{Steps: 2, Batch: 20, Prefill: 18, Decode: 2, Prompt: 28, Gen: 4, Running: 3, Waiting: 0, Used: 9}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stats (-want +got):\n%s", diff)
		}
		if st.KVBlocksUsed+st.KVBlocksCached+st.KVBlocksFree != st.KVBlocksTotal {
			t.Errorf("blocks do not add up: %+v", st)
		}
	})
}
