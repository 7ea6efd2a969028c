package scheduler

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/scheduler/schedtest"
)

const testHidden = 6

func withHidden(m *schedtest.Model) { m.Hidden = testHidden }

// Embedding requests run through the same steps as generation, in chunks
// beside it: each ends with FinishEmbedded and the pooled vector of its
// prompt (the fake's reference, bit for bit, for every pooling), nothing
// sampled, its blocks back in the free list and none in the prefix cache;
// the generations beside them produce their uninterrupted tokens. The
// same on a pool in layer groups (two sliding windows of 6 positions and
// one global group), whose window groups the fake checks at every step.
func TestEmbedBesideGeneration(t *testing.T) {
	for _, tc := range []struct {
		how     batch.Pooling
		windows []int
	}{{batch.PoolMean, nil}, {batch.PoolLast, nil}, {batch.PoolCLS, nil}, {batch.PoolMean, []int{6, 0, 6}}} {
		how := tc.how
		name := how.String()
		if tc.windows != nil {
			name += "/windows"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := testConfig()
				cfg.MaxBatchTokens = 16 // prompts of up to 45 tokens take several chunks
				cfg.Pooling = how
				if tc.windows != nil {
					cfg.KVWindows = tc.windows
					cfg.NumBlocks *= 3
				}
				h := startHarness(t, cfg, withHidden)
				type sub struct {
					prompt []int32
					embed  bool
					ch     <-chan result
				}
				var subs []sub
				for i := range 8 {
					p := prompt(i+40, 5+5*i)
					embed := i%2 == 0
					r := Request{Prompt: p, MaxTokens: 12, IgnoreEOS: true, Embed: embed}
					subs = append(subs, sub{p, embed, h.collectAsync(h.submit(r))})
				}
				for i, s := range subs {
					r := <-s.ch
					if r.err != nil || r.final == nil {
						t.Fatalf("request %d: err %v, final %v", i, r.err, r.final)
					}
					if !s.embed {
						if diff := cmp.Diff(schedtest.Reference(s.prompt, 12, nil), r.tokens); diff != "" {
							t.Errorf("generation %d tokens (-want +got):\n%s", i, diff)
						}
						continue
					}
					f := r.final
					if f.Reason != FinishEmbedded || f.PromptTokens != len(s.prompt) || f.CompletionTokens != 0 || len(r.tokens) != 0 || r.text != "" {
						t.Errorf("embedding %d: reason %v, prompt %d, completion %d, %d tokens, text %q", i, f.Reason, f.PromptTokens, f.CompletionTokens, len(r.tokens), r.text)
					}
					if diff := cmp.Diff(schedtest.ReferenceEmbedding(s.prompt, testHidden, how), f.Embedding); diff != "" {
						t.Errorf("embedding %d (-want +got):\n%s", i, diff)
					}
				}
				for _, st := range h.m.Steps() {
					for k, id := range st.Seqs {
						if id%2 == 1 && st.Sampled[k] { // ids count from 1: odd ids are the embeddings
							t.Errorf("embedding seq %d sampled in a step", id)
						}
					}
				}
				chunked := false
				for _, id := range []uint64{5, 7} {
					chunked = chunked || len(h.m.StepsOf(id)) > 1
				}
				if !chunked {
					t.Error("no embedding ran in more than one step; the test does not test chunking")
				}
				synctest.Wait()
				h.idleEmpty()
				h.stop()
			})
		})
	}
}

// An embedding request's blocks enter no prefix cache, and it takes no
// cached prefix: every token's hidden state is computed.
func TestEmbedPrefixCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Pooling = batch.PoolMean
		h := startHarness(t, cfg, withHidden)
		p := prompt(3, 21)
		e := h.collect(h.submit(Request{Prompt: p, Embed: true}))
		synctest.Wait()
		if st := h.s.Stats(); st.KVBlocksCached != 0 || st.KVBlocksUsed != 0 {
			t.Errorf("after an embedding: %d blocks cached, %d used; want none", st.KVBlocksCached, st.KVBlocksUsed)
		}
		g := h.collect(h.submit(Request{Prompt: p, MaxTokens: 2, IgnoreEOS: true}))
		if g.final.CachedTokens != 0 {
			t.Errorf("generation after an embedding of its prompt: %d cached tokens, want 0", g.final.CachedTokens)
		}
		again := h.collect(h.submit(Request{Prompt: p, Embed: true}))
		if again.final.CachedTokens != 0 {
			t.Errorf("embedding with its prompt cached: %d cached tokens, want 0", again.final.CachedTokens)
		}
		if diff := cmp.Diff(e.final.Embedding, again.final.Embedding); diff != "" {
			t.Errorf("the same embedding before and after the prompt was cached (-before +after):\n%s", diff)
		}
		synctest.Wait()
		h.stop()
	})
}

// Embedding requests preempted under a full pool are computed again from
// their start and give the vector of an uninterrupted run.
func TestEmbedPreempted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.NumBlocks = 24 // 96 positions
		cfg.MaxSeqs = 6
		cfg.MaxBatchTokens = 8
		cfg.WatermarkBlocks = 1
		cfg.Pooling = batch.PoolMean
		h := startHarness(t, cfg, withHidden)
		var chans []<-chan result
		var prompts [][]int32
		// Two generations of high priority that grow to 60 positions
		// each, and embeddings of 40-token prompts of low priority that
		// take 5 steps or more: the growing generations preempt them.
		for i := range 6 {
			r := Request{Prompt: prompt(i+60, 40), Embed: true}
			if i < 2 {
				r = Request{Prompt: prompt(i+60, 10), MaxTokens: 50, IgnoreEOS: true, Priority: 1}
			}
			prompts = append(prompts, r.Prompt)
			chans = append(chans, h.collectAsync(h.submit(r)))
		}
		for i, ch := range chans {
			r := <-ch
			if i >= 2 {
				if diff := cmp.Diff(schedtest.ReferenceEmbedding(prompts[i], testHidden, batch.PoolMean), r.final.Embedding); diff != "" {
					t.Errorf("embedding %d (-want +got):\n%s", i, diff)
				}
				continue
			}
			if diff := cmp.Diff(schedtest.Reference(prompts[i], 50, nil), r.tokens); diff != "" {
				t.Errorf("generation %d (-want +got):\n%s", i, diff)
			}
		}
		if h.s.Stats().Preemptions == 0 {
			t.Error("no preemption happened; the test does not test it")
		}
		synctest.Wait()
		h.idleEmpty()
		h.stop()
	})
}

// Submit refuses an embedding a scheduler cannot serve, and one longer
// than the context; a prompt of the whole context is accepted (nothing is
// generated after it).
func TestEmbedRefused(t *testing.T) {
	mk := func(cfg Config, hidden int) *Scheduler {
		t.Helper()
		m := newFakeModel(cfg)
		m.Hidden = hidden
		s, err := New(cfg, m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cfg := testConfig()
	cfg.ContextLen = 40
	ctx := context.Background()
	if _, err := mk(cfg, 0).Submit(ctx, Request{Prompt: prompt(1, 4), Embed: true}); !errors.Is(err, ErrNoEmbeddings) {
		t.Errorf("model without hidden states: %v, want ErrNoEmbeddings", err)
	}
	static := cfg
	static.Batching = BatchingStatic
	static.BatchSize = 2
	s := mk(static, testHidden)
	if _, err := s.Submit(ctx, Request{Prompt: prompt(1, 4), Embed: true}); !errors.Is(err, ErrNoEmbeddings) {
		t.Errorf("static batching: %v, want ErrNoEmbeddings", err)
	}
	if l := s.Limits(); l.EmbedDim != 0 || l.NoEmbeddings == "" {
		t.Errorf("static batching: Limits EmbedDim %d, NoEmbeddings %q", l.EmbedDim, l.NoEmbeddings)
	}
	s = mk(cfg, testHidden)
	if l := s.Limits(); l.EmbedDim != testHidden || l.MaxEmbedTokens != 40 || l.Pooling != DefaultPooling {
		t.Errorf("Limits: EmbedDim %d, MaxEmbedTokens %d, Pooling %v", l.EmbedDim, l.MaxEmbedTokens, l.Pooling)
	}
	var le *LimitError
	if _, err := s.Submit(ctx, Request{Prompt: prompt(1, 41), Embed: true}); !errors.Is(err, ErrPromptTooLong) || !errors.As(err, &le) || le.Limit != 40 {
		t.Errorf("41 tokens in a context of 40: %v, want ErrPromptTooLong with limit 40", err)
	}
	if _, err := s.Submit(ctx, Request{Embed: true}); !errors.Is(err, ErrEmptyPrompt) {
		t.Errorf("empty prompt: %v, want ErrEmptyPrompt", err)
	}
	if _, err := s.Submit(ctx, Request{Prompt: prompt(1, 40), Embed: true}); err != nil {
		t.Errorf("40 tokens in a context of 40: %v", err)
	}
}
