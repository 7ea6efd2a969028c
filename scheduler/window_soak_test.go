package scheduler

import (
	"context"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/kernels"
)

// TestWindowSoakGemma3 serves mixed long and short requests on the synth
// gemma3 model (sliding window 8 on five of its six layers) over a pool
// laid out in layer groups (cpu.Config.SlidingKV) and small enough that
// long requests preempt each other, with shared prompt stems for the
// prefix cache. Every answer must be the tokens of the same request run
// alone, unpreempted, on a pool where every layer keeps the whole context;
// the core's invariants hold after every step (a window group holds
// exactly the rows its window reads), and at the end no block is used and
// the ledger matches the (empty) block tables. The products run
// batch-invariant, so a token's logits do not depend on the rows beside it
// or on how its prompt was chunked.
func TestWindowSoakGemma3(t *testing.T) {
	prev := kernels.SetBatchInvariant(true)
	defer kernels.SetBatchInvariant(prev)
	m, err := runtime.Load(shareddata.Path(t, "synth/arch2/models/synth-gemma3-256-F32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const bs = 4
	be, err := m.NewCPUBackend(cpu.Config{BlockSize: bs, NumBlocks: 80, SlidingKV: true})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	kv := be.KV()
	if kv.Windows == nil {
		t.Fatal("the backend laid out no layer groups")
	}
	cfg := Config{BlockSize: bs, NumBlocks: kv.NumBlocks, KVWindows: kv.Windows, MaxSeqs: 6, MaxBatchTokens: 24,
		VocabSize: m.HP.VocabSize, WatermarkBlocks: 2}

	rng := rand.New(rand.NewPCG(7, 8))
	toks := func(n int) []int32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32(3 + rng.IntN(m.HP.VocabSize-3))
		}
		return p
	}
	// A request with a 24-token stem runs first, alone; then three more
	// with the stem (first in the queue, so they find it cached), then
	// the mix.
	stem := toks(24)
	var reqs []Request
	for i := range 34 {
		var r Request
		switch {
		case i < 4: // the stem, then a short tail
			r = Request{Prompt: append(slices.Clone(stem), toks(1+rng.IntN(10))...), MaxTokens: 5 + rng.IntN(20)}
		case i%3 == 0: // long: past many windows, 45-55 blocks at the end
			r = Request{Prompt: toks(70 + rng.IntN(40)), MaxTokens: 30 + rng.IntN(20)}
		default:
			r = Request{Prompt: toks(2 + rng.IntN(12)), MaxTokens: 3 + rng.IntN(12)}
		}
		r.IgnoreEOS = true
		reqs = append(reqs, r)
	}

	// Together, on the small pool.
	s, err := New(cfg, runtime.NewEngine(be, m.HP.VocabSize))
	if err != nil {
		t.Fatal(err)
	}
	// A broken invariant (a block a window group should have given back,
	// a ledger that disagrees with the tables) ends the run at once: a
	// leak would otherwise starve the pool and stall the requests.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	steps := 0
	s.afterStep = func(c *core) {
		steps++
		if err := c.check(); err != nil {
			t.Errorf("after step %d: %v", steps, err)
			stop()
		}
	}
	got, finals := serveAll(ctx, t, s, reqs[:1], reqs[1:])
	st := s.Stats()
	if err := s.core.check(); err != nil {
		t.Errorf("at the end: %v", err)
	}
	if st.KVBlocksUsed != 0 || s.core.pool.used != 0 {
		t.Errorf("%d blocks used at the end", st.KVBlocksUsed)
	}
	if st.Preemptions == 0 {
		t.Errorf("no preemption: the pool is not small enough to show it")
	}
	cached := 0
	for i, f := range finals {
		cached += f.CachedTokens
		if i > 0 && i < 4 && f.CachedTokens == 0 {
			t.Errorf("request %d: its stem did not come from the prefix cache", i)
		}
	}
	t.Logf("%d requests, %d steps, %d preemptions, %d prompt tokens from the cache; layout %v over %d blocks",
		len(reqs), st.Steps, st.Preemptions, cached, kv.Windows, kv.NumBlocks)

	// Alone, one at a time, every layer keeping the whole context.
	ref, err := m.NewCPUBackend(cpu.Config{BlockSize: bs, NumBlocks: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for i, r := range reqs {
		rs, err := New(Config{BlockSize: bs, NumBlocks: 512, MaxSeqs: 1, MaxBatchTokens: 24, VocabSize: m.HP.VocabSize, DisablePrefixCache: true},
			runtime.NewEngine(ref, m.HP.VocabSize))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := serveAll(context.Background(), t, rs, []Request{r})
		if p := rs.Stats().Preemptions; p != 0 {
			t.Fatalf("request %d alone: %d preemptions", i, p)
		}
		if diff := cmp.Diff(want[0], got[i]); diff != "" {
			t.Errorf("request %d (prompt %d tokens): tokens differ from its run alone (-alone +together):\n%s", i, len(r.Prompt), diff)
		}
		if len(got[i]) != r.MaxTokens {
			t.Errorf("request %d: %d tokens, want %d", i, len(got[i]), r.MaxTokens)
		}
	}
}

// serveAll runs s until ctx ends or every answer has, and submits the
// requests of each phase at once, once every answer of the phase before
// has ended; it returns each request's tokens and Final, in order.
func serveAll(ctx context.Context, t *testing.T, s *Scheduler, phases ...[]Request) ([][]int32, []*Final) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	var out [][]int32
	var finals []*Final
	for _, reqs := range phases {
		var streams []*Stream
		for _, r := range reqs {
			st, err := s.Submit(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, st)
		}
		for _, st := range streams {
			toks, f := recvAll(ctx, t, len(out), st)
			out, finals = append(out, toks), append(finals, f)
		}
	}
	return out, finals
}

// recvAll reads stream i to its end.
func recvAll(ctx context.Context, t *testing.T, i int, st *Stream) (toks []int32, f *Final) {
	t.Helper()
	for {
		ev, err := st.Recv(ctx)
		if err == io.EOF {
			return toks, f
		}
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		for _, tk := range ev.Tokens {
			toks = append(toks, tk.ID)
		}
		if ev.Final != nil {
			if ev.Final.Err != nil {
				t.Fatalf("request %d: %v", i, ev.Final.Err)
			}
			f = ev.Final
		}
	}
}
