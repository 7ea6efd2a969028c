package scheduler

import (
	goruntime "runtime"
	"runtime/debug"
	"testing"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/llama"
)

// gemma3Attention is a model with Gemma-3-1B's attention shape (the
// gemma3-1b preset of weft gen-model): 26 layers, one KV head of 256,
// a sliding window of 512 on every layer but each sixth (22 window
// layers, 4 global). The CPU backend allocates its KV pool from the
// shape alone; no weights are needed to measure the pool.
func gemma3Attention() *llama.Model {
	m := &llama.Model{HP: llama.HParams{VocabSize: 32000, Dim: 1152, Layers: 26, Heads: 4, KVHeads: 1, HeadDim: 256,
		ContextLen: 32768, RopeBase: 1e6}}
	m.Layers = make([]llama.Layer, m.HP.Layers)
	for li := range m.Layers {
		m.Layers[li].RopeBase = 1e6
		if li%6 != 5 {
			m.Layers[li].Window = 512
			m.Layers[li].RopeBase = 1e4
		}
	}
	return m
}

// kvMeasure is one pool for one sequence of N positions.
type kvMeasure struct {
	N         int
	NumBlocks int
	HeapBytes uint64 // what allocating the CPU pool took (its resident pages on Linux, else heap)
	Peak      int    // the most blocks the sequence held on the ledger
}

// BytesPerToken is the allocated pool over the positions it served.
func (k kvMeasure) BytesPerToken() float64 { return float64(k.HeapBytes) / float64(k.N) }

// measureKV sizes a CPU pool (cpu.PlanPool, f16, blocks of 16) for one
// sequence of n positions, with the windowed layout or every layer
// keeping the whole context, measures what allocating it adds to the heap,
// then serves one request of n positions on the scheduler's ledger over
// that pool (the fake model, which checks every window group's reads)
// and records the most blocks it held. The request must run to its end
// without preemption: the pool is all one sequence of n needs.
func measureKV(t *testing.T, m *llama.Model, sliding bool, n int) kvMeasure {
	t.Helper()
	const bs = 16
	pc := cpu.PoolConfig{Layers: m.HP.Layers, KVDim: m.HP.KVHeads * m.HP.HeadDim, ContextLen: n, BlockSize: bs, MaxSeqs: 1, KVType: "f16"}
	if sliding {
		for _, l := range m.Layers {
			pc.Windows = append(pc.Windows, l.Window)
		}
	}
	plan, err := cpu.PlanPool(pc)
	if err != nil {
		t.Fatal(err)
	}
	var before, after goruntime.MemStats
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection between the two readings
	goruntime.ReadMemStats(&before)
	be, err := cpu.New(m, cpu.Config{BlockSize: bs, NumBlocks: plan.NumBlocks, KVType: "f16", SlidingKV: sliding, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	goruntime.ReadMemStats(&after)
	kv := be.KV()
	k := kvMeasure{N: n, NumBlocks: kv.NumBlocks, HeapBytes: after.HeapAlloc - before.HeapAlloc}
	where := "the heap"
	// Linux: the pool is mapped outside the heap and populated (cpu's
	// kvmem); its own pages are counted, not the process's resident
	// memory, which the runtime's other allocations (and huge pages
	// behind them) move by megabytes.
	if res, ok := be.KVResident(); ok {
		k.HeapBytes, where = uint64(res), "resident memory"
	}
	be.Close()
	if res, ok := be.KVResident(); ok && res != 0 {
		t.Errorf("n %d sliding %v: %d bytes of the pool still resident after Close", n, sliding, res)
	}
	// The pool takes what the accounting names, within 1%: what a block
	// takes (batch.KVBytesPerBlock of a group's layers) is what the
	// backend allocates.
	if want := uint64(kv.NumBlocks) * uint64(kv.BytesPerBlock); k.HeapBytes < want-want/100 || k.HeapBytes > want+want/100 {
		t.Errorf("n %d sliding %v: allocating the pool added %d bytes to %s, the accounting says %d blocks x %d = %d",
			n, sliding, k.HeapBytes, where, kv.NumBlocks, kv.BytesPerBlock, want)
	}
	if (kv.Windows != nil) != sliding {
		t.Fatalf("sliding %v: the backend reports groups %v", sliding, kv.Windows)
	}

	r := newCoreRig(t, Config{BlockSize: bs, NumBlocks: kv.NumBlocks, KVWindows: kv.Windows, MaxSeqs: 1, MaxBatchTokens: 2048})
	const gen = 8
	sq := r.add(1, Request{Prompt: prompt(1, n-gen), MaxTokens: gen, IgnoreEOS: true})
	for steps := 0; r.c.live > 0; steps++ {
		if steps > n {
			t.Fatalf("n %d sliding %v: not done after %d steps (%d computed, %d running)", n, sliding, steps, sq.computed, len(r.c.running))
		}
		r.step()
		k.Peak = max(k.Peak, r.c.pool.used)
	}
	if got := len(sq.tokens) - sq.promptLen; got != gen || r.c.stats.Preemptions != 0 {
		t.Errorf("n %d sliding %v: %d of %d tokens, %d preemptions", n, sliding, got, gen, r.c.stats.Preemptions)
	}
	if err := r.m.Err(); err != nil {
		t.Errorf("fake model: %v", err)
	}
	if r.c.pool.used != 0 || k.Peak > kv.NumBlocks {
		t.Errorf("n %d sliding %v: %d blocks used at the end, peak %d of %d", n, sliding, r.c.pool.used, k.Peak, kv.NumBlocks)
	}
	return k
}

// TestWindowKVBytesPerToken measures the KV memory of one Gemma-3-1B-shaped
// sequence (f16 cache) in the pool the CPU backend allocates for it: with
// every layer keeping the whole context a token takes 26 layers x 256 x 2
// (K, V) x 2 bytes = 26,624 bytes, whatever the length. Laid out in layer
// groups (13 groups of 2 layers: 11 window, 2 global) a window group holds
// at most 33 blocks of 16 positions, so a sequence of n positions holds
// 2 x n/16 + 11 x 33 blocks of 32 KiB: 5,548 bytes per token at 8,192 and
// 4,459 at 32,768 (4.8x and 6.0x less). The figures come from the memory
// the allocation took (the pool's resident pages on Linux, where it is
// mapped and populated; the heap elsewhere) and the ledger's blocks of a real run through the
// scheduler; BENCHMARKS.md quotes them.
func TestWindowKVBytesPerToken(t *testing.T) {
	m := gemma3Attention()
	for _, tc := range []struct {
		n       int
		sliding bool
		blocks  int     // batch.SeqBlocks of the layout at n
		perTok  float64 // bytes per token of the pool
	}{
		// Without groups the bytes per token do not depend on n; a short
		// sequence keeps the test's allocation small.
		{2048, false, 128, 26624},
		{8192, true, 2*512 + 11*33, 5548},
		{32768, true, 2*2048 + 11*33, 4459},
	} {
		k := measureKV(t, m, tc.sliding, tc.n)
		t.Logf("n %d sliding %v: %d blocks, peak %d held, %d bytes: %.0f bytes per token",
			tc.n, tc.sliding, k.NumBlocks, k.Peak, k.HeapBytes, k.BytesPerToken())
		if k.NumBlocks != tc.blocks || k.Peak != tc.blocks {
			t.Errorf("n %d sliding %v: pool of %d blocks, %d held at the peak; want %d", tc.n, tc.sliding, k.NumBlocks, k.Peak, tc.blocks)
		}
		if got := k.BytesPerToken(); got < tc.perTok*0.99 || got > tc.perTok*1.01 {
			t.Errorf("n %d sliding %v: %.0f bytes per token, want %.0f", tc.n, tc.sliding, got, tc.perTok)
		}
	}
	if got := batch.SeqBlocks(batch.NewKVLayout(windowsOf(m), true).Windows, 16, 8192); got != 2*512+11*33 {
		t.Errorf("SeqBlocks at 8192: %d", got)
	}
}

func windowsOf(m *llama.Model) []int {
	w := make([]int, len(m.Layers))
	for li, l := range m.Layers {
		w[li] = l.Window
	}
	return w
}
