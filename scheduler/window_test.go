package scheduler

import (
	"slices"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/scheduler/schedtest"
)

// evict takes a cached block out of the prefix cache, as the allocator
// does when it needs the block for another sequence.
func (p *blockPool) evict(b int32) {
	if p.state[b] != blockCached {
		panic("evict of a block that is not cached")
	}
	p.lruRemove(b)
	p.unregister(b)
	p.state[b] = blockFree
	p.free = append(p.free, b)
}

// The prefix-cache rule with window groups: a cached prefix of k rows is
// reused when every group without window has rows [0, k) and every window
// group has the rows its window reads from position k*BlockSize on; a
// missing row inside a window lowers k below it, one below every window
// changes nothing. The answers are the fake's uninterrupted run (which
// checks every window group's reads) whatever is reused.
func TestWindowPrefixRule(t *testing.T) {
	// Block size 4, groups: window 6, none, window 6. The first request
	// computes 20 prompt positions (rows 0-4, all registered); the second
	// extends its prompt by 4, so up to 5 rows could be reused. At k = 5
	// the windows read from position 20-6+1 = 15: rows 3 and 4.
	for _, tc := range []struct {
		name   string
		evict  [][2]int // (group, row) taken out of the cache
		cached int      // Final.CachedTokens of the second request
	}{
		{"all cached", nil, 20},
		{"window row below every window", [][2]int{{0, 0}, {2, 1}, {0, 2}}, 20},
		// Row 3 of group 0 missing: k = 3, whose windows read rows 1-2.
		{"window row inside the window", [][2]int{{0, 3}}, 12},
		// Row 4 of group 2 missing: k = 4 reads rows 2-3.
		{"last window row", [][2]int{{2, 4}}, 16},
		// Then row 1 of group 0 too: k = 4 still reads rows 2-3 only.
		{"last window row and one below", [][2]int{{2, 4}, {0, 1}}, 16},
		// Rows 4 and 2: k = 4 needs row 2, so k = 2 (rows 0-1).
		{"two window rows", [][2]int{{2, 4}, {0, 2}}, 8},
		{"global row", [][2]int{{1, 2}}, 8},
		{"first global row", [][2]int{{1, 0}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := Config{BlockSize: 4, NumBlocks: 64, MaxSeqs: 4, MaxBatchTokens: 64, KVWindows: []int{6, 0, 6}}
				r := newCoreRig(t, cfg)
				first := r.add(1, Request{Prompt: prompt(1, 20), MaxTokens: 1, IgnoreEOS: true})
				for r.c.live > 0 {
					r.step()
				}
				second := testSeq(2, Request{Prompt: append(slices.Clone(first.req.Prompt), prompt(2, 4)...), MaxTokens: 5, IgnoreEOS: true})
				for _, e := range tc.evict {
					b, ok := r.c.lookupRow(second, e[0], e[1])
					if !ok {
						t.Fatalf("group %d row %d is not cached", e[0], e[1])
					}
					r.c.pool.evict(b)
				}
				r.c.queued.Add(1)
				r.c.submit(second)
				for r.c.live > 0 {
					r.step()
				}
				if second.cached != tc.cached {
					t.Errorf("cached tokens %d, want %d", second.cached, tc.cached)
				}
				if diff := cmp.Diff(schedtest.Reference(second.req.Prompt, 5, nil), second.tokens[second.promptLen:]); diff != "" {
					t.Errorf("tokens (-want +got):\n%s", diff)
				}
				if err := r.m.Err(); err != nil {
					t.Errorf("fake model: %v", err)
				}
				if r.c.pool.used != 0 {
					t.Errorf("%d blocks used at the end", r.c.pool.used)
				}
			})
		})
	}
}

// A decoding sequence holds a window group's blocks only for its window:
// in every decode step its blocks are at most batch.SeqBlocks of the
// positions it then has, however long it grows, and reach that bound (the
// checker also holds every slid-out row to -1 after each step).
func TestWindowBlocksHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		windows := []int{6, 0, 6, 9}
		cfg := Config{BlockSize: 4, NumBlocks: 128, MaxSeqs: 4, MaxBatchTokens: 8, KVWindows: windows}
		r := newCoreRig(t, cfg)
		sq := r.add(1, Request{Prompt: prompt(1, 30), MaxTokens: 70, IgnoreEOS: true})
		tight, decodes := 0, 0
		r.m.OnStep = func(step int, seqs []batch.SeqStep) {
			if len(seqs) != 1 || seqs[0].Pos < sq.promptLen {
				return
			}
			decodes++
			n := seqs[0].Pos + 1
			bound := batch.SeqBlocks(windows, cfg.BlockSize, n)
			if used := r.c.pool.used; used > bound {
				t.Errorf("step %d: %d positions, %d blocks used, more than %d", step, n, used, bound)
			} else if used == bound {
				tight++
			}
		}
		for r.c.live > 0 {
			r.step()
		}
		t.Logf("%d decode steps, %d at the bound", decodes, tight)
		if decodes == 0 || tight == 0 {
			t.Errorf("%d decode steps, %d at the bound: the bound is not shown tight", decodes, tight)
		}
		if diff := cmp.Diff(schedtest.Reference(sq.req.Prompt, 70, nil), sq.tokens[sq.promptLen:]); diff != "" {
			t.Errorf("tokens (-want +got):\n%s", diff)
		}
		if err := r.m.Err(); err != nil {
			t.Errorf("fake model: %v", err)
		}
	})
}

// The context a pool of layer groups holds: the longest sequence whose
// blocks fit (batch.SeqBlocks), and the static mode refuses groups.
func TestWindowConfig(t *testing.T) {
	for _, tc := range []struct {
		name      string
		windows   []int
		numBlocks int
		want      int
	}{
		{"no groups", nil, 40, 160},
		// rows + 2*min(rows, 3) <= 40: 34 rows.
		{"two windows, one global", []int{6, 0, 6}, 40, 136},
		// rows + 2*min(rows, 3) <= 5: 1 row (3 blocks), 2 rows need 6.
		{"tiny pool", []int{6, 0, 6}, 5, 4},
		// Window groups alone: the pool's positions bound it as without.
		{"windows only", []int{6, 6}, 40, 160},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{BlockSize: 4, NumBlocks: tc.numBlocks, KVWindows: tc.windows}
			if err := cfg.validate(); err != nil {
				t.Fatal(err)
			}
			if cfg.ContextLen != tc.want {
				t.Errorf("ContextLen %d, want %d", cfg.ContextLen, tc.want)
			}
		})
	}
	bad := []Config{
		{BlockSize: 4, NumBlocks: 40, KVWindows: []int{6, 0}, Batching: BatchingStatic},
		{BlockSize: 4, NumBlocks: 40, KVWindows: []int{}},
		{BlockSize: 4, NumBlocks: 40, KVWindows: []int{-1, 0}},
	}
	for _, cfg := range bad {
		if err := cfg.validate(); err == nil {
			t.Errorf("validate(%+v) accepted", cfg)
		}
	}
}
