package runtime

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// markovBackend is a fake whose logits after a token depend on that token
// alone (table[tok]): a Markov chain over a small vocabulary. It honours
// SeqStep.Draft when drafts is set.
type markovBackend struct {
	table  [][]float32
	drafts bool
}

func (f *markovBackend) Forward(ctx context.Context, seqs []batch.SeqStep, logits [][]float32) error {
	V := len(f.table)
	for i, s := range seqs {
		if logits[i] == nil {
			continue
		}
		for r := range s.Draft + 1 {
			copy(logits[i][r*V:(r+1)*V], f.table[s.Tokens[len(s.Tokens)-1-s.Draft+r]])
		}
	}
	return nil
}
func (f *markovBackend) KV() batch.KVInfo  { return batch.KVInfo{} }
func (f *markovBackend) Name() string      { return "markov" }
func (f *markovBackend) Close() error      { return nil }
func (f *markovBackend) DraftLogits() bool { return f.drafts }
func newMarkov(drafts bool) *markovBackend { return &markovBackend{table: markovTable, drafts: drafts} }

// markovTable: 8 tokens; after token t the likeliest next is (t+1)%8.
var markovTable = func() [][]float32 {
	tab := make([][]float32, 8)
	for t := range tab {
		tab[t] = make([]float32, 8)
		for j := range tab[t] {
			tab[t][j] = float32(-0.4 * float64((j-t-1+8)%8))
		}
	}
	return tab
}()

// TestStepDraftsGreedy checks greedy verification: the longest prefix of
// drafts equal to the argmax is accepted, then the model's own token.
func TestStepDraftsGreedy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tokens []int32 // last token, then drafts
		want   []int32
	}{
		{"all accepted", []int32{2, 3, 4, 5}, []int32{3, 4, 5, 6}},
		{"second rejected", []int32{2, 3, 7, 0}, []int32{3, 4}},
		{"first rejected", []int32{2, 5, 6}, []int32{3}},
		{"no drafts", []int32{6}, []int32{7}},
	} {
		e := NewEngine(newMarkov(true), 8)
		seqs := []batch.SeqStep{
			{Seq: 1, Tokens: tc.tokens, Logits: true, Draft: len(tc.tokens) - 1},
			{Seq: 2, Tokens: []int32{0, 1}}, // a prompt chunk beside it
			{Seq: 3, Tokens: []int32{4}, Logits: true},
		}
		out, err := e.StepDrafts(context.Background(), seqs, []*sample.Sampler{sample.New(sample.Params{}, nil), nil, sample.New(sample.Params{}, nil)})
		if err != nil {
			t.Fatal(err)
		}
		var got []int32
		for _, r := range out[0] {
			got = append(got, r.Token)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: tokens (-want +got):\n%s", tc.name, diff)
		}
		if len(out[1]) != 0 || len(out[2]) != 1 || out[2][0].Token != 5 {
			t.Errorf("%s: other rows %v, %v; want none and [5]", tc.name, out[1], out[2])
		}
	}
}

// TestStepDraftsRefused checks that drafts go only to a backend that
// computes their logits, and never through Step.
func TestStepDraftsRefused(t *testing.T) {
	seqs := []batch.SeqStep{{Seq: 1, Tokens: []int32{2, 3}, Logits: true, Draft: 1}}
	smp := []*sample.Sampler{sample.New(sample.Params{}, nil)}
	e := NewEngine(newMarkov(false), 8)
	if e.VerifiesDrafts() {
		t.Error("VerifiesDrafts on a backend without DraftLogits")
	}
	if _, err := e.StepDrafts(context.Background(), seqs, smp); err == nil || !strings.Contains(err.Error(), "does not compute") {
		t.Errorf("StepDrafts on a backend without DraftLogits: err %v", err)
	}
	e = NewEngine(newMarkov(true), 8)
	if _, err := e.Step(context.Background(), seqs, smp); err == nil {
		t.Error("Step accepted a drafted row")
	}
	bad := []batch.SeqStep{{Seq: 1, Tokens: []int32{2, 3}, Logits: true, Draft: 2}}
	if _, err := e.StepDrafts(context.Background(), bad, smp); err == nil {
		t.Error("StepDrafts accepted a row of drafts only")
	}
}

// decodeRun generates n tokens after prompt with the engine: one token per
// step, or with draft(history) proposing tokens to verify each step.
func decodeRun(t *testing.T, e *Engine, p sample.Params, prompt []int32, n int, draft func([]int32) []int32) (toks []int32, accepted int) {
	t.Helper()
	smp := sample.New(p, prompt)
	hist := append([]int32(nil), prompt...)
	for len(hist)-len(prompt) < n {
		row := []int32{hist[len(hist)-1]}
		if draft != nil {
			row = append(row, draft(hist)...)
		}
		out, err := e.StepDrafts(context.Background(), []batch.SeqStep{{Seq: 1, Tokens: row, Logits: true, Draft: len(row) - 1}}, []*sample.Sampler{smp})
		if err != nil {
			t.Fatal(err)
		}
		accepted += len(out[0]) - 1
		for _, r := range out[0] {
			hist = append(hist, r.Token)
		}
	}
	return hist[len(prompt) : len(prompt)+n], accepted
}

// TestStepDraftsSampledIdentity: with temperature, filters and penalties
// (which depend on the tokens accepted before each position), a sequence's
// tokens for a seed are those of decoding without drafts, whatever is
// drafted: each position is sampled from the sampler's state after the
// tokens before it, with that token index's seeded draw.
func TestStepDraftsSampledIdentity(t *testing.T) {
	drafts := map[string]func([]int32) []int32{
		"likeliest chain": func(h []int32) []int32 {
			l := h[len(h)-1]
			return []int32{(l + 1) % 8, (l + 2) % 8, (l + 3) % 8}
		},
		"constant": func([]int32) []int32 { return []int32{2, 2} },
	}
	e := NewEngine(newMarkov(true), 8)
	total := 0
	for seed := range uint64(200) {
		p := sample.Params{Temperature: 1, TopK: 6, TopP: 0.95, RepetitionPenalty: 1.3, PresencePenalty: 0.4, Seed: seed, Logprobs: true}
		want, _ := decodeRun(t, e, p, []int32{0}, 12, nil)
		for name, d := range drafts {
			got, acc := decodeRun(t, e, p, []int32{0}, 12, d)
			total += acc
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("seed %d, drafts %s: tokens differ from decoding alone (-want +got):\n%s", seed, name, diff)
			}
		}
	}
	if total == 0 {
		t.Fatal("no draft was ever accepted: the test checked nothing")
	}
}

// TestStepDraftsDistribution is the statistical test of rejection sampling
// with a deterministic draft: over a fixed set of 20000 seeds, at
// temperature 1 with no filters, the first token emitted for a row whose
// first draft is d is distributed as the target q = softmax(logits): a
// chi-square goodness-of-fit statistic over the 8 tokens (7 degrees of
// freedom) below 24.32, its 0.001 critical value; and d is accepted at a
// rate within 4 standard errors of q(d). The seeds are fixed, so the test
// is deterministic.
func TestStepDraftsDistribution(t *testing.T) {
	const n = 20000
	e := NewEngine(newMarkov(true), 8)
	const last, d = 0, 1 // d is the likeliest token after 0
	q := softmax(markovTable[last])
	counts := make([]int, 8)
	acc := 0
	for seed := range uint64(n) {
		smp := sample.New(sample.Params{Temperature: 1, Seed: 1000 + seed}, nil)
		out, err := e.StepDrafts(context.Background(), []batch.SeqStep{{Seq: 1, Tokens: []int32{last, d, 2}, Logits: true, Draft: 2}}, []*sample.Sampler{smp})
		if err != nil {
			t.Fatal(err)
		}
		counts[out[0][0].Token]++
		if out[0][0].Token == d {
			acc++
		}
	}
	chi2 := 0.0
	for tok, c := range counts {
		exp := n * q[tok]
		chi2 += (float64(c) - exp) * (float64(c) - exp) / exp
	}
	if chi2 > 24.32 {
		t.Errorf("chi-square %.2f over 7 degrees of freedom (counts %v, expected %v): the emitted tokens are not the target's distribution", chi2, counts, q)
	}
	rate, se := float64(acc)/n, math.Sqrt(q[d]*(1-q[d])/n)
	if math.Abs(rate-q[d]) > 4*se {
		t.Errorf("draft accepted at rate %.4f, target probability %.4f (4 s.e. = %.4f)", rate, q[d], 4*se)
	}
	t.Logf("chi-square %.2f, acceptance %.4f vs q(d) %.4f", chi2, rate, q[d])
}

func softmax(l []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range l {
		mx = math.Max(mx, float64(v))
	}
	out := make([]float64, len(l))
	var z float64
	for i, v := range l {
		out[i] = math.Exp(float64(v) - mx)
		z += out[i]
	}
	for i := range out {
		out[i] /= z
	}
	return out
}
