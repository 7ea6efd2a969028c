package scheduler

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/scheduler/schedtest"
)

func TestNgramDraft(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hist       []int32
		nMax, nMin int
		k          int
		want       []int32
	}{
		{"trigram match", []int32{1, 2, 3, 4, 5, 9, 1, 2, 3}, 3, 1, 4, []int32{4, 5, 9, 1}},
		{"capped by k", []int32{1, 2, 3, 4, 5, 9, 1, 2, 3}, 3, 1, 2, []int32{4, 5}},
		{"past the history: the period repeats", []int32{7, 1, 2, 3, 4, 1, 2, 3}, 3, 1, 9, []int32{4, 1, 2, 3, 4, 1, 2, 3, 4}},
		{"period two", []int32{9, 1, 2, 1, 2, 1, 2}, 3, 1, 5, []int32{1, 2, 1, 2, 1}},
		{"latest occurrence", []int32{1, 2, 5, 1, 2, 6, 1, 2}, 2, 1, 1, []int32{6}},
		{"longest n wins", []int32{3, 1, 2, 8, 9, 1, 2, 7, 3, 1, 2}, 3, 1, 1, []int32{8}},
		{"falls back to unigram", []int32{4, 5, 6, 7, 8, 9, 6}, 3, 1, 2, []int32{7, 8}},
		{"nMin above the match", []int32{4, 5, 6, 7, 8, 9, 6}, 3, 2, 2, nil},
		{"no match", []int32{1, 2, 3, 4}, 3, 1, 4, nil},
		{"overlapping run", []int32{5, 5, 5, 5}, 3, 1, 3, []int32{5, 5, 5}},
		{"one token", []int32{5}, 3, 1, 3, nil},
	} {
		got := ngramDraft(tc.hist, tc.nMax, tc.nMin, tc.k, nil)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
		}
	}
	// The drafts follow what out already holds (the row's decode token),
	// and the overlapping copy reads the drafts, not out's first tokens.
	if diff := cmp.Diff([]int32{42, 6, 7, 6, 7}, ngramDraft([]int32{6, 7, 6, 7}, 3, 1, 4, []int32{42})); diff != "" {
		t.Errorf("after a row's first token (-want +got):\n%s", diff)
	}
}

func TestSpecConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec SpecConfig
		stat bool
		want string // error substring; "" is valid
	}{
		{"off", SpecConfig{}, false, ""},
		{"ngram", SpecConfig{Source: SpecNgram}, false, ""},
		{"unknown source", SpecConfig{Source: "eagle"}, false, "Source"},
		{"draft without drafter", SpecConfig{Source: SpecDraft}, false, "Drafter"},
		{"drafter without draft", SpecConfig{Source: SpecNgram, Drafter: &copyDrafter{}}, false, "Drafter"},
		{"draft", SpecConfig{Source: SpecDraft, Drafter: &copyDrafter{}}, false, ""},
		{"static", SpecConfig{Source: SpecNgram}, true, "continuous"},
		{"off with static", SpecConfig{Source: SpecOff}, true, ""},
		{"n-gram order", SpecConfig{Source: SpecNgram, NgramMax: 1, NgramMin: 2}, false, "n-gram"},
		{"draft range", SpecConfig{Source: SpecNgram, MaxDraft: 65}, false, "MaxDraft"},
	} {
		cfg := testConfig()
		cfg.Spec = tc.spec
		if tc.stat {
			cfg.Batching = BatchingStatic
		}
		err := cfg.validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
	// A model that cannot verify drafts is refused when speculation is on.
	cfg := testConfig()
	cfg.Spec.Source = SpecNgram
	m := newFakeModel(cfg)
	m.NoDrafts = true
	if _, err := New(cfg, m); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("New with a model that does not verify drafts: err %v", err)
	}
	cfg.Spec.Source = SpecOff
	if _, err := New(cfg, m); err != nil {
		t.Errorf("New with speculation off: %v", err)
	}
}

// copyNext repeats the history with period 12: the answer copies the
// prompt over and over, the prompt-copy workload n-gram drafts serve.
func copyNext(h []int32) int32 { return h[len(h)-12] }

// A prompt-copy request: with n-gram drafts the tokens are those of an
// uninterrupted run without them, most drafts are accepted, and the answer
// takes far fewer steps than tokens.
func TestSpecPromptCopy(t *testing.T) {
	for _, spec := range []string{SpecOff, SpecNgram} {
		t.Run(spec, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := testConfig()
				cfg.Spec = SpecConfig{Source: spec}
				h := startHarness(t, cfg, func(m *schedtest.Model) { m.Next = copyNext })
				p := prompt(3, 12)
				const n = 100
				r := h.collect(h.submit(Request{Prompt: p, MaxTokens: n, IgnoreEOS: true}))
				if diff := cmp.Diff(schedtest.Reference(p, n, copyNext), r.tokens); diff != "" {
					t.Fatalf("tokens (-want +got):\n%s", diff)
				}
				synctest.Wait() // the loop publishes Stats after the step that sent Final
				st := h.s.Stats()
				f := r.final
				if f.Reason != FinishLength || f.CompletionTokens != n {
					t.Errorf("final %+v", f)
				}
				if f.DraftTokens != int(st.SpecDraftTokens) || f.AcceptedTokens != int(st.SpecAcceptedTokens) {
					t.Errorf("final drafted/accepted %d/%d, stats %d/%d", f.DraftTokens, f.AcceptedTokens, st.SpecDraftTokens, st.SpecAcceptedTokens)
				}
				t.Logf("%d steps, drafted %d, accepted %d", st.Steps, st.SpecDraftTokens, st.SpecAcceptedTokens)
				if spec == SpecOff {
					if st.SpecDraftTokens != 0 || st.Steps != n {
						t.Errorf("off: %d steps, %d drafted", st.Steps, st.SpecDraftTokens)
					}
				} else {
					if st.SpecAcceptedTokens < n/2 || st.Steps > n/3 {
						t.Errorf("ngram: %d steps for %d tokens, %d of %d drafts accepted", st.Steps, n, st.SpecAcceptedTokens, st.SpecDraftTokens)
					}
				}
				for k, rec := range h.m.Steps() {
					tot := 0
					for _, x := range rec.N {
						tot += x
					}
					for i, d := range rec.Draft {
						if d > DefaultSpecMaxDraft || (d > 0 && tot > DefaultSpecMaxStepTokens) {
							t.Errorf("step %d: draft %d in a step of %d tokens", k+1, d, tot)
						}
						if d > 0 && rec.N[i] != d+1 {
							t.Errorf("step %d: row of %d tokens with %d drafts", k+1, rec.N[i], d)
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

// Drafts stop at MaxTokens and at a stop string inside an accepted run;
// a large step never speculates.
func TestSpecLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Spec = SpecConfig{Source: SpecNgram, MaxStepTokens: 6}
		h := startHarness(t, cfg, func(m *schedtest.Model) { m.Next = copyNext })
		p := prompt(5, 12)
		ref := schedtest.Reference(p, 60, copyNext)
		// A stop string of two letters that occurs late in the answer.
		txt := schedtest.LettersOf(ref)
		stop := txt[40:42]
		cut := strings.Index(txt, stop)
		a := h.collectAsync(h.submit(Request{Prompt: p, MaxTokens: 37, IgnoreEOS: true}))
		b := h.collectAsync(h.submit(Request{Prompt: p, MaxTokens: 60, IgnoreEOS: true, StopStrings: []string{stop}}))
		ra, rb := <-a, <-b
		if diff := cmp.Diff(ref[:37], ra.tokens); diff != "" || ra.final.Reason != FinishLength {
			t.Errorf("max tokens: reason %v, tokens (-want +got):\n%s", ra.final.Reason, diff)
		}
		if rb.final.Reason != FinishStopSequence || rb.text != txt[:cut] || len(rb.tokens) != cut+len(stop) {
			t.Errorf("stop string %q: reason %v, text %q (want %q), %d tokens (want %d)", stop, rb.final.Reason, rb.text, txt[:cut], len(rb.tokens), cut+len(stop))
		}
		if diff := cmp.Diff(ref[:len(rb.tokens)], rb.tokens); diff != "" {
			t.Errorf("stop string: tokens (-want +got):\n%s", diff)
		}
		for k, rec := range h.m.Steps() {
			tot, drafted := 0, false
			for i, x := range rec.N {
				tot += x
				drafted = drafted || rec.Draft[i] > 0
			}
			if drafted && tot > 6 {
				t.Errorf("step %d: %d tokens with drafts, MaxStepTokens 6", k+1, tot)
			}
		}
		if h.s.Stats().SpecAcceptedTokens == 0 {
			t.Error("no draft accepted")
		}
		synctest.Wait()
		h.idleEmpty()
		h.stop()
	})
}

// A speculating sequence cancelled mid-answer, and one preempted by a
// higher-priority one on a small pool: nothing leaks (the harness checks
// the ledger after every step and at the end), the cancelled stream got a
// prefix of its answer, the preempted one resumes without a lost or
// repeated token.
func TestSpecCancelAndPreempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.NumBlocks = 24
		cfg.WatermarkBlocks = 1
		cfg.Spec = SpecConfig{Source: SpecNgram, MaxStepTokens: 64}
		h := startHarness(t, cfg, func(m *schedtest.Model) { m.Next = copyNext })
		pa, pb, pc := prompt(1, 12), prompt(2, 12), prompt(3, 12)
		a := h.submit(Request{Prompt: pa, MaxTokens: 70, IgnoreEOS: true})
		c := h.submit(Request{Prompt: pc, MaxTokens: 70, IgnoreEOS: true})
		ra, rc := h.collectAsync(a), h.collectAsync(c)
		time.Sleep(4 * stepDur)
		c.Cancel()
		b := h.submit(Request{Prompt: pb, MaxTokens: 60, IgnoreEOS: true, Priority: 1})
		rb := h.collectAsync(b)
		resA, resB, resC := <-ra, <-rb, <-rc
		for _, x := range []struct {
			name string
			p    []int32
			r    result
			n    int
		}{{"a", pa, resA, 70}, {"b", pb, resB, 60}} {
			if diff := cmp.Diff(schedtest.Reference(x.p, x.n, copyNext), x.r.tokens); diff != "" || x.r.final.Reason != FinishLength {
				t.Errorf("%s: reason %v, tokens (-want +got):\n%s", x.name, x.r.final.Reason, diff)
			}
		}
		if resC.final.Reason != FinishCancelled || len(resC.tokens) == 0 || len(resC.tokens) >= 70 {
			t.Errorf("cancelled: reason %v after %d tokens", resC.final.Reason, len(resC.tokens))
		}
		if diff := cmp.Diff(schedtest.Reference(pc, len(resC.tokens), copyNext), resC.tokens); diff != "" {
			t.Errorf("cancelled: tokens (-want +got):\n%s", diff)
		}
		synctest.Wait()
		st := h.s.Stats()
		t.Logf("%d steps, %d preemptions, drafted %d, accepted %d", st.Steps, st.Preemptions, st.SpecDraftTokens, st.SpecAcceptedTokens)
		if st.Preemptions == 0 || st.SpecAcceptedTokens == 0 {
			t.Errorf("%d preemptions, %d accepted drafts: the test misses its case", st.Preemptions, st.SpecAcceptedTokens)
		}
		synctest.Wait()
		h.idleEmpty()
		h.stop()
	})
}

// adaptDraft: full acceptance doubles the draft length up to MaxDraft,
// partial sets it one past the accepted count, none halves it, and
// specMisses outright rejections in a row pause drafting.
func TestAdaptDraft(t *testing.T) {
	cfg := testConfig()
	cfg.Spec = SpecConfig{Source: SpecNgram, MaxDraft: 6, PauseSteps: 5}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	c := newCore(cfg, new(atomicInt64))
	sq := &seq{spec: specState{k: 2}}
	type st struct{ K, Misses, Pause int }
	for i, tc := range []struct {
		drafted, accepted int
		want              st
	}{
		{2, 2, st{4, 0, 0}},
		{4, 4, st{6, 0, 0}}, // capped by MaxDraft
		{6, 6, st{6, 0, 0}},
		{6, 2, st{3, 0, 0}},
		{3, 0, st{1, 1, 0}},
		{1, 0, st{1, 2, 0}},
		{1, 0, st{1, 0, 5}}, // third miss in a row: pause
	} {
		c.adaptDraft(sq, tc.drafted, tc.accepted)
		if got := (st{sq.spec.k, sq.spec.misses, sq.spec.pause}); got != tc.want {
			t.Errorf("step %d (%d of %d accepted): %+v, want %+v", i, tc.accepted, tc.drafted, got, tc.want)
		}
	}
}

// copyDrafter is a Drafter for the copyNext model: it proposes copyNext's
// continuation, wrong at every fifth position of a sequence's history (so
// some drafts are rejected). It records what it keeps per sequence, as a
// draft model keeps K/V, and checks the calls: one Draft per step at
// most, never a sequence it was told to forget without a new history
// start, each request within its limits.
type copyDrafter struct {
	t       *testing.T
	known   map[uint64]int // sequence -> history length last drafted for
	calls   int
	forgets int
}

func (d *copyDrafter) Draft(ctx context.Context, reqs []batch.DraftRequest) error {
	d.calls++
	seen := map[uint64]bool{}
	for i := range reqs {
		r := &reqs[i]
		if seen[r.Seq] || r.Max <= 0 || len(r.Out) != 1 || r.Out[0] != r.History[len(r.History)-1] {
			d.t.Errorf("draft request seq %d: max %d, out %v, twice %v", r.Seq, r.Max, r.Out, seen[r.Seq])
		}
		seen[r.Seq] = true
		d.known[r.Seq] = len(r.History)
		h := append([]int32(nil), r.History...)
		for range r.Max {
			tok := copyNext(h)
			if len(h)%5 == 0 {
				tok = (tok + 1) % 26
			}
			h = append(h, tok)
			r.Out = append(r.Out, tok)
		}
	}
	return nil
}

func (d *copyDrafter) Forget(seq uint64) {
	d.forgets++
	delete(d.known, seq)
}

// A draft-model source (SpecDraft) on the TestSpecCancelAndPreempt
// workload: the same tokens, drafts accepted, one Draft call per step at
// most, and every sequence forgotten by the drafter once it no longer
// runs (cancelled, preempted, finished).
func TestSpecDrafterCancelAndPreempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dr := &copyDrafter{t: t, known: map[uint64]int{}}
		cfg := testConfig()
		cfg.NumBlocks = 24
		cfg.WatermarkBlocks = 1
		cfg.Spec = SpecConfig{Source: SpecDraft, Drafter: dr, MaxStepTokens: 64}
		h := startHarness(t, cfg, func(m *schedtest.Model) { m.Next = copyNext })
		pa, pb, pc := prompt(1, 12), prompt(2, 12), prompt(3, 12)
		a := h.submit(Request{Prompt: pa, MaxTokens: 70, IgnoreEOS: true})
		c := h.submit(Request{Prompt: pc, MaxTokens: 70, IgnoreEOS: true})
		ra, rc := h.collectAsync(a), h.collectAsync(c)
		time.Sleep(4 * stepDur)
		c.Cancel()
		b := h.submit(Request{Prompt: pb, MaxTokens: 60, IgnoreEOS: true, Priority: 1})
		rb := h.collectAsync(b)
		resA, resB, resC := <-ra, <-rb, <-rc
		for _, x := range []struct {
			name string
			p    []int32
			r    result
			n    int
		}{{"a", pa, resA, 70}, {"b", pb, resB, 60}} {
			if diff := cmp.Diff(schedtest.Reference(x.p, x.n, copyNext), x.r.tokens); diff != "" || x.r.final.Reason != FinishLength {
				t.Errorf("%s: reason %v, tokens (-want +got):\n%s", x.name, x.r.final.Reason, diff)
			}
		}
		if resC.final.Reason != FinishCancelled || len(resC.tokens) == 0 || len(resC.tokens) >= 70 {
			t.Errorf("cancelled: reason %v after %d tokens", resC.final.Reason, len(resC.tokens))
		}
		if diff := cmp.Diff(schedtest.Reference(pc, len(resC.tokens), copyNext), resC.tokens); diff != "" {
			t.Errorf("cancelled: tokens (-want +got):\n%s", diff)
		}
		synctest.Wait()
		st := h.s.Stats()
		t.Logf("%d steps, %d preemptions, drafted %d, accepted %d, %d Draft calls, %d Forgets", st.Steps, st.Preemptions, st.SpecDraftTokens, st.SpecAcceptedTokens, dr.calls, dr.forgets)
		if st.Preemptions == 0 || st.SpecAcceptedTokens == 0 || st.SpecAcceptedTokens == st.SpecDraftTokens {
			t.Errorf("%d preemptions, %d of %d drafts accepted: the test misses its case", st.Preemptions, st.SpecAcceptedTokens, st.SpecDraftTokens)
		}
		if dr.calls == 0 || dr.calls > int(st.Steps) {
			t.Errorf("%d Draft calls in %d steps", dr.calls, st.Steps)
		}
		if len(dr.known) != 0 {
			t.Errorf("the drafter still keeps %v: sequences never forgotten", dr.known)
		}
		if dr.forgets < 3+int(st.Preemptions) {
			t.Errorf("%d Forgets for 3 sequences and %d preemptions", dr.forgets, st.Preemptions)
		}
		h.idleEmpty()
		h.stop()
	})
}
