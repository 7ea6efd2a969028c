package scheduler

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"github.com/weft-inference/weft/runtime/batch"
)

// rowRec is one row of a recorded step.
type rowRec struct {
	seq     uint64
	pos, n  int
	blocks  []int32
	sampled bool
}

// recordRows makes the fake record every step's rows.
func recordRows(mu *sync.Mutex, steps *[][]rowRec) func(*fakeModel) {
	return func(m *fakeModel) {
		prev := m.onStep
		m.onStep = func(step int, seqs []batch.SeqStep) {
			rows := make([]rowRec, len(seqs))
			for i, s := range seqs {
				rows[i] = rowRec{s.Seq, s.Pos, len(s.Tokens), slices.Clone(s.Blocks), s.Logits}
			}
			mu.Lock()
			*steps = append(*steps, rows)
			mu.Unlock()
			if prev != nil {
				prev(step, seqs)
			}
		}
	}
}

// outcomeOf is what a client sees of a stream, timings left out.
type outcomeOf struct {
	Tokens             []int32
	Text               string
	Reason             FinishReason
	Prompt, Completion int
	StopMatched        string
}

func seen(r result) outcomeOf {
	return outcomeOf{Tokens: r.tokens, Text: r.text, Reason: r.final.Reason, Prompt: r.final.PromptTokens,
		Completion: r.final.CompletionTokens, StopMatched: r.final.StopMatched}
}

// A static group keeps its shape: every decode step computes one row per
// member until the longest ends, whatever ended the others (length, stop
// token, EOS). Padding rows use only scratch blocks, advance one position
// per step and sample (discarded). What every client sees, and the usage
// counters, are those of a continuous run of the same requests.
func TestStaticPaddingKeepsShape(t *testing.T) {
	pc := prompt(2, 5)
	// c's fifth token is the fake EOS.
	next := func(h []int32) int32 {
		if len(h) == len(pc)+4 && slices.Equal(h[:len(pc)], pc) {
			return 0
		}
		return refNext(h)
	}
	pb := prompt(1, 9)
	refB := reference(pb, 20, next)
	const stopAt = 6 // b ends with its 7th token, a stop token id
	if slices.Contains(refB[:stopAt], refB[stopAt]) {
		t.Fatalf("b's reference %v repeats the stop token early", refB)
	}
	reqs := []Request{
		{Prompt: prompt(0, 6), MaxTokens: 3, IgnoreEOS: true},
		{Prompt: pb, MaxTokens: 20, StopTokenIDs: []int32{refB[stopAt]}},
		{Prompt: pc, MaxTokens: 25},
		{Prompt: prompt(3, 7), MaxTokens: 30, IgnoreEOS: true},
	}
	wantReasons := []FinishReason{FinishLength, FinishStopSequence, FinishEOS, FinishLength}
	const groupSteps = 30 // one prefill step (sampling each first token), then 29 decode steps
	const longest = 9     // b's prompt

	run := func(t *testing.T, batching string) ([]outcomeOf, Stats, [][]rowRec, []uint64, Config) {
		var outs []outcomeOf
		var st Stats
		var steps [][]rowRec
		var ids []uint64
		cfg := testConfig()
		cfg.Batching = batching
		cfg.BatchSize = len(reqs)
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			h := newHarness(t, cfg, func(m *fakeModel) {
				m.next = next
				recordRows(&mu, &steps)(m)
			})
			var chans []<-chan result
			for _, r := range reqs {
				s := h.submit(r)
				ids = append(ids, s.id)
				chans = append(chans, h.collectAsync(s))
			}
			h.run()
			var done []int64
			for i, ch := range chans {
				r := <-ch
				if r.err != nil || r.final == nil {
					t.Fatalf("request %d: err %v final %v", i, r.err, r.final)
				}
				outs = append(outs, seen(r))
				done = append(done, int64(r.doneAt))
			}
			if batching == BatchingStatic && slices.Min(done) != slices.Max(done) {
				t.Errorf("answers delivered at %v, want all at group end", done)
			}
			synctest.Wait()
			h.idleEmpty()
			st = h.s.Stats()
			h.stop()
		})
		return outs, st, steps, ids, cfg
	}

	cont, contStats, _, _, _ := run(t, BatchingContinuous)
	stat, st, steps, ids, cfg := run(t, BatchingStatic)
	if diff := cmp.Diff(cont, stat); diff != "" {
		t.Errorf("static answers differ from continuous ones (-cont +static):\n%s", diff)
	}
	for i, o := range stat {
		if o.Reason != wantReasons[i] {
			t.Errorf("request %d ended with %d, want %d", i, o.Reason, wantReasons[i])
		}
		if diff := cmp.Diff(reference(reqs[i].Prompt, o.Completion, next), o.Tokens); diff != "" {
			t.Errorf("request %d tokens (-want +got):\n%s", i, diff)
		}
	}

	// Usage: padding is counted apart.
	gen := 0
	for _, o := range stat {
		gen += o.Completion
	}
	if st.GenerationTokens != uint64(gen) || contStats.GenerationTokens != uint64(gen) {
		t.Errorf("GenerationTokens static %d continuous %d, want %d", st.GenerationTokens, contStats.GenerationTokens, gen)
	}
	if st.PromptTokens != contStats.PromptTokens {
		t.Errorf("PromptTokens static %d continuous %d", st.PromptTokens, contStats.PromptTokens)
	}
	// A member that generated g tokens ended at step g and pads the rest;
	// prompts are padded to the longest (9).
	wantPad := 0
	for i, o := range stat {
		wantPad += groupSteps - o.Completion + longest - len(reqs[i].Prompt)
	}
	if st.PaddingTokens != uint64(wantPad) || contStats.PaddingTokens != 0 {
		t.Errorf("PaddingTokens static %d (want %d), continuous %d (want 0)", st.PaddingTokens, wantPad, contStats.PaddingTokens)
	}
	ledger := cfg.NumBlocks - (len(reqs) - 1)
	if st.KVBlocksReserved != len(reqs)-1 || st.KVBlocksTotal != ledger || st.KVBlocksFree+st.KVBlocksCached != ledger {
		t.Errorf("static KV stats %+v, want %d reserved and a ledger of %d all free", st, len(reqs)-1, ledger)
	}
	if contStats.KVBlocksReserved != 0 || contStats.KVBlocksTotal != cfg.NumBlocks {
		t.Errorf("continuous KV stats %+v", contStats)
	}

	// The shape of every step.
	if len(steps) != groupSteps {
		t.Fatalf("%d steps, want %d", len(steps), groupSteps)
	}
	ended := map[uint64]int{} // member -> last step with its own row
	plen := map[uint64]int{}
	for i, id := range ids {
		ended[id] = stat[i].Completion
		plen[id] = len(reqs[i].Prompt)
	}
	// Step 1: every prompt, and a padding row for each shorter one.
	var got, want []string
	scratchOf := map[int32]bool{}
	for _, r := range steps[0] {
		isScratch := slices.ContainsFunc(r.blocks, func(b int32) bool { return int(b) >= ledger })
		if !isScratch {
			got = append(got, fmt.Sprintf("seq %d: %d tokens at %d, sampled %v", r.seq, r.n, r.pos, r.sampled))
			continue
		}
		got = append(got, fmt.Sprintf("seq %d: %d padding tokens at %d, sampled %v", r.seq, r.n, r.pos, r.sampled))
		if b := r.blocks[0]; int(b) >= cfg.NumBlocks || scratchOf[b] || slices.ContainsFunc(r.blocks, func(x int32) bool { return x != b }) {
			t.Errorf("prompt padding of seq %d: block table %v", r.seq, r.blocks)
		}
		scratchOf[r.blocks[0]] = true
	}
	for _, id := range ids {
		want = append(want, fmt.Sprintf("seq %d: %d tokens at 0, sampled true", id, plen[id]))
	}
	for _, id := range ids {
		if plen[id] < longest {
			want = append(want, fmt.Sprintf("seq %d: %d padding tokens at 0, sampled false", id, longest-plen[id]))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prefill step rows (-want +got):\n%s", diff)
	}
	lastPad := map[uint64]rowRec{}
	for k, rows := range steps[1:] {
		step := k + 2
		if len(rows) != len(reqs) {
			t.Errorf("step %d: %d rows, want %d", step, len(rows), len(reqs))
		}
		for _, r := range rows {
			if r.n != 1 || !r.sampled {
				t.Errorf("step %d seq %d: %d tokens, sampled %v; want one sampled decode row", step, r.seq, r.n, r.sampled)
			}
			if step <= ended[r.seq] {
				for _, b := range r.blocks {
					if int(b) >= ledger {
						t.Errorf("step %d seq %d: live row holds scratch block %d", step, r.seq, b)
					}
				}
				continue
			}
			// Padding row.
			for _, b := range r.blocks {
				if int(b) < ledger || int(b) >= cfg.NumBlocks || b != r.blocks[0] {
					t.Errorf("step %d seq %d: padding row block table %v, want one scratch block in [%d, %d)", step, r.seq, r.blocks, ledger, cfg.NumBlocks)
					break
				}
			}
			if len(r.blocks)*cfg.BlockSize < r.pos+1 {
				t.Errorf("step %d seq %d: padding row at %d with %d blocks", step, r.seq, r.pos, len(r.blocks))
			}
			if p, ok := lastPad[r.seq]; ok && r.pos != p.pos+1 {
				t.Errorf("step %d seq %d: padding row at %d after %d", step, r.seq, r.pos, p.pos)
			}
			lastPad[r.seq] = r
		}
	}
	if len(lastPad) != len(reqs)-1 {
		t.Errorf("%d members padded, want %d", len(lastPad), len(reqs)-1)
	}
	// Distinct members never share a scratch block.
	owner := map[int32]uint64{}
	for id, r := range lastPad {
		if o, ok := owner[r.blocks[0]]; ok {
			t.Errorf("seqs %d and %d share scratch block %d", o, id, r.blocks[0])
		}
		owner[r.blocks[0]] = id
	}
}

// A member cancelled mid-group ends at once and gives its blocks back, but
// its row stays in the batch as padding until the group ends.
func TestStaticCancelKeepsRow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Batching = BatchingStatic
		cfg.BatchSize = 3
		cfg.DisablePrefixCache = true // released blocks go straight to free
		var mu sync.Mutex
		var steps [][]rowRec
		var victim *Stream
		used := map[int]int{}
		var s *Scheduler
		h := newHarness(t, cfg, func(m *fakeModel) {
			m.onStep = func(step int, seqs []batch.SeqStep) {
				mu.Lock()
				used[step] = s.Stats().KVBlocksUsed // after step-1
				mu.Unlock()
				if step == 5 {
					victim.Cancel()
				}
			}
			recordRows(&mu, &steps)(m)
		})
		s = h.s
		a := h.collectAsync(h.submit(Request{Prompt: prompt(0, 6), MaxTokens: 20, IgnoreEOS: true}))
		victim = h.submit(Request{Prompt: prompt(1, 6), MaxTokens: 20, IgnoreEOS: true})
		c := h.collectAsync(victim)
		b := h.collectAsync(h.submit(Request{Prompt: prompt(2, 6), MaxTokens: 20, IgnoreEOS: true}))
		h.run()
		rc := <-c
		ra, rb := <-a, <-b
		if rc.final.Reason != FinishCancelled || rc.doneAt >= ra.doneAt {
			t.Errorf("cancelled member: %+v at %v, group ended at %v", rc.final, rc.doneAt, ra.doneAt)
		}
		if n := len(rc.tokens); n < 4 || n > 6 {
			t.Errorf("cancelled member got %d tokens", n)
		}
		if diff := cmp.Diff(reference(prompt(1, 6), len(rc.tokens), nil), rc.tokens); diff != "" {
			t.Errorf("cancelled member tokens (-want +got):\n%s", diff)
		}
		for i, r := range []result{ra, rb} {
			if r.final.Reason != FinishLength || len(r.tokens) != 20 {
				t.Errorf("member %d: %+v", i, r.final)
			}
		}
		if len(steps) != 20 {
			t.Errorf("%d steps, want 20", len(steps))
		}
		for k, rows := range steps {
			if len(rows) != 3 {
				t.Errorf("step %d: %d rows, want 3", k+1, len(rows))
			}
		}
		mu.Lock()
		defer mu.Unlock()
		// Each member reserved ceil((6+20)/4) = 7 blocks at admission.
		if used[4] != 21 || used[8] != 14 {
			t.Errorf("KV blocks used before the cancel %d (want 21), after %d (want 14)", used[4], used[8])
		}
		synctest.Wait()
		h.idleEmpty()
		if st := h.s.Stats(); st.GenerationTokens != uint64(40+len(rc.tokens)) || st.PaddingTokens == 0 {
			t.Errorf("stats %+v", st)
		}
		h.stop()
	})
}

// Static mode reserves BatchSize-1 scratch blocks: they bound ContextLen
// and must leave the ledger at least one block.
func TestStaticConfigReservesScratch(t *testing.T) {
	for _, tc := range []struct {
		name                string
		cfg                 Config
		wantErr             bool
		wantCtx, wantLedger int
	}{
		{"continuous keeps the pool", Config{BlockSize: 4, NumBlocks: 10, MaxSeqs: 4, BatchSize: 4}, false, 40, 10},
		{"static reserves 3", Config{BlockSize: 4, NumBlocks: 10, MaxSeqs: 4, Batching: BatchingStatic, BatchSize: 4}, false, 28, 7},
		{"static clamps ContextLen", Config{BlockSize: 4, NumBlocks: 10, MaxSeqs: 4, Batching: BatchingStatic, BatchSize: 4, ContextLen: 40}, false, 28, 7},
		{"static keeps a smaller ContextLen", Config{BlockSize: 4, NumBlocks: 10, MaxSeqs: 4, Batching: BatchingStatic, BatchSize: 4, ContextLen: 9}, false, 9, 7},
		{"static group of one reserves none", Config{BlockSize: 4, NumBlocks: 10, MaxSeqs: 4, Batching: BatchingStatic, BatchSize: 1}, false, 40, 10},
		{"static default BatchSize", Config{BlockSize: 4, NumBlocks: 10, MaxSeqs: 4, Batching: BatchingStatic}, false, 28, 7},
		{"static reserve eats the pool", Config{BlockSize: 4, NumBlocks: 3, MaxSeqs: 4, Batching: BatchingStatic, BatchSize: 4}, true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			err := cfg.validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("validate: %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			got := []int{cfg.ContextLen, cfg.ledgerBlocks(), newCore(cfg, new(atomicInt64)).snapshot(false).KVBlocksTotal}
			if diff := cmp.Diff([]int{tc.wantCtx, tc.wantLedger, tc.wantLedger}, got); diff != "" {
				t.Errorf("ContextLen, ledger, KVBlocksTotal (-want +got):\n%s", diff)
			}
		})
	}
}

// Prompt padding is chunked under MaxBatchTokens like the prompts, after
// them, and decoding waits until it is done.
func TestStaticPromptPaddingChunked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Batching = BatchingStatic
		cfg.BatchSize = 2
		cfg.MaxBatchTokens = 8
		var mu sync.Mutex
		var steps [][]rowRec
		h := newHarness(t, cfg, recordRows(&mu, &steps))
		a := h.collectAsync(h.submit(Request{Prompt: prompt(0, 12), MaxTokens: 2, IgnoreEOS: true}))
		b := h.collectAsync(h.submit(Request{Prompt: prompt(1, 3), MaxTokens: 2, IgnoreEOS: true}))
		h.run()
		ra, rb := <-a, <-b
		for i, r := range []result{ra, rb} {
			if diff := cmp.Diff(reference(prompt(i, []int{12, 3}[i]), 2, nil), r.tokens); diff != "" {
				t.Errorf("request %d tokens (-want +got):\n%s", i, diff)
			}
		}
		synctest.Wait()
		mu.Lock()
		var got [][2]int // rows, tokens per step
		for _, rows := range steps {
			n := 0
			for _, r := range rows {
				n += r.n
			}
			got = append(got, [2]int{len(rows), n})
		}
		mu.Unlock()
		// 1: a's first 8; 2: a's last 4, b's 3, 1 of b's 9 padding tokens;
		// 3: the other 8 padding tokens; 4: both decode.
		if diff := cmp.Diff([][2]int{{1, 8}, {3, 8}, {1, 8}, {2, 2}}, got); diff != "" {
			t.Errorf("rows and tokens per step (-want +got):\n%s", diff)
		}
		if st := h.s.Stats(); st.PaddingTokens != 9 || st.GenerationTokens != 4 || st.PromptTokens != 15 {
			t.Errorf("stats %+v", st)
		}
		h.idleEmpty()
		h.stop()
	})
}
