package scheduler_test

import (
	"context"
	"io"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/scheduler"
)

// specPrompts are the synth golden prompts (BOS included), a prompt that
// says the same thing twice (a copy workload for n-gram drafts), and a
// longer one made of the first three.
var specPrompts = [][]int32{
	{1, 403, 407, 261, 378},
	{1, 291, 376, 400, 428},
	{1, 317, 391, 266, 267},
	{1, 403, 407, 261, 378, 291, 376, 400, 428, 403, 407, 261, 378, 291, 376, 400, 428, 403, 407},
	{1, 403, 407, 261, 378, 1, 291, 376, 400, 428, 1, 317, 391, 266, 267},
}

// TestSpecGreedyIdentityGolden runs every golden model through the
// scheduler and the CPU engine, all prompts at once, greedy, with n-gram
// speculation off and on: the tokens must be identical. The products run
// batch-invariant, so a token's logits are the same bits whatever the rows
// beside it (a drafted row of 1+k tokens, or other sequences); without
// that, speculation changes the batch's shape as continuous batching
// itself does, and a near-tie may round either way. Sampled at
// temperature 0.8 (top-p 0.9, a seed per request) the tokens are the same
// too: verification draws each position with the seeded draw decoding
// alone uses. Drafts must be accepted on every model, or the test would
// pass vacuously.
func TestSpecGreedyIdentityGolden(t *testing.T) {
	prev := kernels.SetBatchInvariant(true)
	defer kernels.SetBatchInvariant(prev)
	models := []string{
		"models/stories260K.gguf", "models/stories260K-F16.gguf",
		"models/stories260K-Q8_0.gguf", "models/stories260K-Q4_0.gguf",
		"synth/models/synth-256-F32.gguf", "synth/models/synth-256-F16.gguf",
		"synth/models/synth-256-Q8_0.gguf", "synth/models/synth-256-Q4_0.gguf",
		"synth/models/synth-256-Q4_K_M.gguf",
	}
	for _, rel := range models {
		t.Run(rel, func(t *testing.T) {
			m, err := runtime.Load(shareddata.Path(t, rel))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			be, err := m.NewCPUBackend(cpu.Config{BlockSize: 4, NumBlocks: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			eng := runtime.NewEngine(be, m.HP.VocabSize)
			for _, temp := range []float32{0, 0.8} {
				want, _ := specRun(t, eng, m.HP.VocabSize, temp, scheduler.SpecConfig{})
				got, st := specRun(t, eng, m.HP.VocabSize, temp, scheduler.SpecConfig{Source: scheduler.SpecNgram, MaxStepTokens: 64})
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("temperature %g: tokens with n-gram drafts differ from without (-without +with):\n%s", temp, diff)
				}
				t.Logf("temperature %g: drafted %d, accepted %d", temp, st.SpecDraftTokens, st.SpecAcceptedTokens)
				if st.SpecAcceptedTokens == 0 {
					t.Errorf("temperature %g: no draft accepted: the identity was not exercised", temp)
				}
			}
		})
	}
}

// specRun serves specPrompts together (64 greedy tokens each) and returns
// every answer and the scheduler's Stats.
// Temperature temp (0: greedy).
func specRun(t *testing.T, eng *runtime.Engine, vocab int, temp float32, spec scheduler.SpecConfig) ([][]int32, scheduler.Stats) {
	t.Helper()
	s, err := scheduler.New(scheduler.Config{BlockSize: 4, NumBlocks: 256, MaxSeqs: 8, MaxBatchTokens: 64, VocabSize: vocab, Spec: spec}, eng)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	var streams []*scheduler.Stream
	for i, p := range specPrompts {
		smp := sample.Params{Temperature: temp, Seed: uint64(i)}
		if temp > 0 {
			smp.TopP = 0.9
		}
		st, err := s.Submit(ctx, scheduler.Request{Prompt: slices.Clone(p), MaxTokens: 64, IgnoreEOS: true, Sampling: smp})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	var out [][]int32
	for i, st := range streams {
		var toks []int32
		for {
			ev, err := st.Recv(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("prompt %d: %v", i, err)
			}
			for _, tk := range ev.Tokens {
				toks = append(toks, tk.ID)
			}
			if ev.Final != nil && ev.Final.Reason != scheduler.FinishLength {
				t.Fatalf("prompt %d: final %+v", i, ev.Final)
			}
		}
		out = append(out, toks)
	}
	return out, s.Stats()
}

// TestSpecDraftModelIdentityGolden runs golden targets with a draft model
// (SpecDraft, runtime.DraftModel) the way TestSpecGreedyIdentityGolden
// runs n-gram drafts: greedy and sampled tokens identical to decoding
// without drafts, batch-invariant. The draft is a quantised copy of the
// target, or the target itself: then its greedy drafts are exactly the
// target's greedy choices (same kernels, same bits), so at temperature 0
// every draft must be accepted. After each run every sequence has been
// forgotten: the draft pool is whole again.
func TestSpecDraftModelIdentityGolden(t *testing.T) {
	prev := kernels.SetBatchInvariant(true)
	defer kernels.SetBatchInvariant(prev)
	for _, tc := range []struct{ target, draft string }{
		{"models/stories260K.gguf", "models/stories260K-Q4_0.gguf"},
		{"models/stories260K.gguf", "models/stories260K.gguf"},
		{"models/stories260K-F16.gguf", "models/stories260K-Q8_0.gguf"},
		{"synth/models/synth-256-F32.gguf", "synth/models/synth-256-Q4_0.gguf"},
	} {
		t.Run(tc.target+"<-"+tc.draft, func(t *testing.T) {
			m, err := runtime.Load(shareddata.Path(t, tc.target))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			dm, err := runtime.Load(shareddata.Path(t, tc.draft))
			if err != nil {
				t.Fatal(err)
			}
			defer dm.Close()
			if err := runtime.CheckDraftVocab(m, dm); err != nil {
				t.Fatal(err)
			}
			be, err := m.NewCPUBackend(cpu.Config{BlockSize: 4, NumBlocks: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			db, err := dm.NewCPUBackend(cpu.Config{BlockSize: 4, NumBlocks: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			drafter, err := runtime.NewDraftModel(db, dm.HP.VocabSize, 0)
			if err != nil {
				t.Fatal(err)
			}
			eng := runtime.NewEngine(be, m.HP.VocabSize)
			self := tc.target == tc.draft
			for _, temp := range []float32{0, 0.8} {
				want, _ := specRun(t, eng, m.HP.VocabSize, temp, scheduler.SpecConfig{})
				got, st := specRun(t, eng, m.HP.VocabSize, temp, scheduler.SpecConfig{Source: scheduler.SpecDraft, Drafter: drafter, MaxStepTokens: 64})
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("temperature %g: tokens with a draft model differ from without (-without +with):\n%s", temp, diff)
				}
				t.Logf("temperature %g: drafted %d, accepted %d", temp, st.SpecDraftTokens, st.SpecAcceptedTokens)
				if st.SpecAcceptedTokens == 0 {
					t.Errorf("temperature %g: no draft accepted: the identity was not exercised", temp)
				}
				if self && temp == 0 && st.SpecAcceptedTokens != st.SpecDraftTokens {
					t.Errorf("self-draft, greedy: %d of %d drafts accepted, want all", st.SpecAcceptedTokens, st.SpecDraftTokens)
				}
				if n, free := drafter.Sequences(), drafter.FreeBlocks(); n != 0 || free != 256 {
					t.Errorf("temperature %g: after the run the drafter keeps %d sequences, %d of 256 blocks free", temp, n, free)
				}
			}
		})
	}
}

// TestSpecDraftModelPreemptCancel serves stories260K with its Q4_0 copy as
// draft model on a target pool too small for the three answers at once
// (a sequence is preempted and recomputed) and a draft pool too small for
// all of them (a sequence that finds no draft blocks decodes without
// drafts), while a fourth request is cancelled mid-answer. The answers
// are the tokens of the same requests without speculation; the cancelled
// one got a prefix of its answer; afterwards neither pool holds a block.
func TestSpecDraftModelPreemptCancel(t *testing.T) {
	prev := kernels.SetBatchInvariant(true)
	defer kernels.SetBatchInvariant(prev)
	m, err := runtime.Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dm, err := runtime.Load(shareddata.Path(t, "models/stories260K-Q4_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer dm.Close()
	be, err := m.NewCPUBackend(cpu.Config{BlockSize: 4, NumBlocks: 48})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	const draftBlocks = 30
	db, err := dm.NewCPUBackend(cpu.Config{BlockSize: 4, NumBlocks: draftBlocks})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	drafter, err := runtime.NewDraftModel(db, dm.HP.VocabSize, 0)
	if err != nil {
		t.Fatal(err)
	}
	eng := runtime.NewEngine(be, m.HP.VocabSize)
	run := func(spec scheduler.SpecConfig) ([][]int32, []int32, scheduler.Stats) {
		s, err := scheduler.New(scheduler.Config{BlockSize: 4, NumBlocks: 48, WatermarkBlocks: 1, MaxSeqs: 8, MaxBatchTokens: 64, VocabSize: m.HP.VocabSize, Spec: spec}, eng)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// Every request is queued before the loop starts, so the loop
		// admits them together: the pool fills and preempts whatever
		// the OS does to this goroutine between two Submits.
		var streams []*scheduler.Stream
		for i, p := range specPrompts[:3] {
			st, err := s.Submit(ctx, scheduler.Request{Prompt: slices.Clone(p), MaxTokens: 64, IgnoreEOS: true, Priority: i})
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, st)
		}
		cctx, ccancel := context.WithCancel(ctx)
		cs, err := s.Submit(cctx, scheduler.Request{Prompt: slices.Clone(specPrompts[3]), MaxTokens: 64, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		defer func() {
			cancel()
			<-done
		}()
		var cancelled []int32
		for {
			ev, err := cs.Recv(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range ev.Tokens {
				cancelled = append(cancelled, tk.ID)
			}
			if len(cancelled) >= 10 {
				ccancel()
			}
		}
		ccancel()
		var out [][]int32
		for i, st := range streams {
			var toks []int32
			for {
				ev, err := st.Recv(ctx)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("prompt %d: %v", i, err)
				}
				for _, tk := range ev.Tokens {
					toks = append(toks, tk.ID)
				}
			}
			out = append(out, toks)
		}
		// Every answer has ended; the loop published its Stats after the
		// step that ended the last one. Stop it, then read them.
		cancel()
		<-done
		done <- nil // for the deferred wait
		return out, cancelled, s.Stats()
	}
	want, wantC, _ := run(scheduler.SpecConfig{})
	got, gotC, st := run(scheduler.SpecConfig{Source: scheduler.SpecDraft, Drafter: drafter, MaxStepTokens: 64})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tokens with a draft model differ from without (-without +with):\n%s", diff)
	}
	if len(gotC) < 10 || len(gotC) >= 64 || !slices.Equal(gotC, wantC[:min(len(gotC), len(wantC))]) && !slices.Equal(wantC, gotC[:min(len(gotC), len(wantC))]) {
		t.Errorf("cancelled: %d tokens %v, not a prefix of the answer %v", len(gotC), gotC, wantC)
	}
	t.Logf("drafted %d, accepted %d, %d preemptions", st.SpecDraftTokens, st.SpecAcceptedTokens, st.Preemptions)
	if st.Preemptions == 0 || st.SpecAcceptedTokens == 0 {
		t.Errorf("%d preemptions, %d accepted drafts: the test misses its case", st.Preemptions, st.SpecAcceptedTokens)
	}
	if st.KVBlocksUsed != 0 {
		t.Errorf("target pool: %d blocks still used", st.KVBlocksUsed)
	}
	if n, free := drafter.Sequences(), drafter.FreeBlocks(); n != 0 || free != draftBlocks {
		t.Errorf("draft pool: %d sequences kept, %d of %d blocks free", n, free, draftBlocks)
	}
}
