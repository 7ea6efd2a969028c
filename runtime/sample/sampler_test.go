package sample

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func randLogits(r *rand.Rand, n int, scale float32) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64()) * scale
	}
	return l
}

func refArgmax(l []float32) int32 {
	best := int32(0)
	for i, v := range l {
		if v > l[best] {
			best = int32(i)
		}
	}
	return best
}

func TestGreedyIsArgmax(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 7, 512, 32000} {
		for trial := range 5 {
			l := randLogits(r, n, 3)
			s := New(Params{}, nil)
			if got, want := s.Sample(l).Token, refArgmax(l); got != want {
				t.Errorf("n=%d trial %d: greedy = %d, argmax = %d", n, trial, got, want)
			}
		}
	}
	// Ties go to the lowest id.
	l := []float32{0, 5, 1, 5, 5}
	if got := New(Params{}, nil).Sample(l).Token; got != 1 {
		t.Errorf("tie: greedy = %d, want 1", got)
	}
	// NaN never wins.
	l = []float32{float32(math.NaN()), -1, float32(math.NaN())}
	if got := New(Params{}, nil).Sample(l).Token; got != 1 {
		t.Errorf("NaN: greedy = %d, want 1", got)
	}
}

func TestSampleDoesNotModifyLogits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	l := randLogits(r, 1000, 2)
	orig := slices.Clone(l)
	s := New(Params{Temperature: 0.8, TopK: 50, TopP: 0.9, MinP: 0.01, RepetitionPenalty: 1.3,
		PresencePenalty: 0.5, FrequencyPenalty: 0.5, Logprobs: true, TopLogprobs: 5}, []int32{1, 2, 3})
	for range 10 {
		s.Sample(l)
	}
	if diff := cmp.Diff(orig, l); diff != "" {
		t.Errorf("logits changed (-before +after):\n%s", diff)
	}
}

// run samples steps tokens, each step from fresh logits drawn from a stream
// that depends only on the step, and returns the tokens.
func run(s *Sampler, n, steps int) []int32 {
	r := rand.New(rand.NewPCG(99, 0))
	var toks []int32
	for range steps {
		toks = append(toks, s.Sample(randLogits(r, n, 2)).Token)
	}
	return toks
}

func TestSeedDeterminism(t *testing.T) {
	p := Params{Temperature: 1, TopP: 0.95, Seed: 42}
	a := run(New(p, nil), 500, 50)
	b := run(New(p, nil), 500, 50)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different tokens (-a +b):\n%s", diff)
	}
	p.Seed = 43
	c := run(New(p, nil), 500, 50)
	if cmp.Equal(a, c) {
		t.Errorf("seeds 42 and 43 gave the same 50 tokens: %v", a)
	}
}

// A sampler rebuilt with New + Accept (a resumed sequence) continues
// exactly as the original.
func TestRebuildWithAcceptContinues(t *testing.T) {
	p := Params{Temperature: 0.9, TopK: 40, RepetitionPenalty: 1.2, FrequencyPenalty: 0.3, Seed: 7}
	prompt := []int32{5, 6, 7}
	r := rand.New(rand.NewPCG(5, 5))
	logits := make([][]float32, 30)
	for i := range logits {
		logits[i] = randLogits(r, 300, 2)
	}
	orig := New(p, prompt)
	var want []int32
	for _, l := range logits {
		want = append(want, orig.Sample(l).Token)
	}
	rebuilt := New(p, prompt)
	for _, tok := range want[:15] {
		rebuilt.Accept(tok)
	}
	var got []int32
	for _, l := range logits[15:] {
		got = append(got, rebuilt.Sample(l).Token)
	}
	if diff := cmp.Diff(want[15:], got); diff != "" {
		t.Errorf("rebuilt sampler diverged (-original +rebuilt):\n%s", diff)
	}
	if got := rebuilt.Generated(); got != 30 {
		t.Errorf("Generated() = %d, want 30", got)
	}
}

func TestFiltersThatReduceToGreedy(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for name, p := range map[string]Params{
		"top-k 1":          {Temperature: 1.5, TopK: 1, Seed: 1},
		"top-p tiny":       {Temperature: 1.5, TopP: 1e-6, Seed: 2},
		"top-p tiny+top-k": {Temperature: 1.5, TopK: 100, TopP: 1e-6, Seed: 3},
		"min-p 1":          {Temperature: 1.5, MinP: 1, Seed: 4},
	} {
		s := New(p, nil)
		for trial := range 20 {
			l := randLogits(r, 32000, 1)
			if got, want := s.Sample(l).Token, refArgmax(l); got != want {
				t.Errorf("%s trial %d: token %d, argmax %d", name, trial, got, want)
			}
		}
	}
}

// refDist is the plain reference of the temperature path: full sort, then
// top-k, top-p, min-p, renormalize. It returns token -> probability.
func refDist(work []float32, p Params) map[int32]float64 {
	n := len(work)
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i)
	}
	sort.SliceStable(ids, func(a, b int) bool { return work[ids[a]] > work[ids[b]] })
	mx := float64(work[ids[0]])
	w := make([]float64, n)
	for i, t := range ids {
		w[i] = math.Exp((float64(work[t]) - mx) / float64(p.Temperature))
	}
	keep := n
	if p.TopK > 0 && p.TopK < keep {
		keep = p.TopK
	}
	if p.TopP > 0 && p.TopP < 1 {
		var z float64
		for _, v := range w[:keep] {
			z += v
		}
		var cum float64
		for i, v := range w[:keep] {
			cum += v / z
			if cum >= float64(p.TopP) {
				keep = i + 1
				break
			}
		}
	}
	out := map[int32]float64{}
	var z float64
	for i := range keep {
		if p.MinP > 0 && w[i] < float64(p.MinP) {
			continue
		}
		out[ids[i]] = w[i]
		z += w[i]
	}
	for t := range out {
		out[t] /= z
	}
	return out
}

// chiSquare draws n tokens and returns Pearson's statistic against want and
// the degrees of freedom; tokens outside want's support fail the test.
func chiSquare(t *testing.T, s *Sampler, logits []float32, want map[int32]float64, n int) (float64, int) {
	t.Helper()
	counts := map[int32]int{}
	for range n {
		tok := s.Sample(logits).Token
		if want[tok] == 0 {
			t.Fatalf("sampled token %d outside the reference support %v", tok, want)
		}
		counts[tok]++
	}
	var chi float64
	for tok, p := range want {
		e := p * float64(n)
		d := float64(counts[tok]) - e
		chi += d * d / e
	}
	return chi, len(want) - 1
}

// chi-square critical values at p = 0.001.
var chiCrit = map[int]float64{1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52, 6: 22.46, 7: 24.32}

func TestSampledFrequenciesMatchDistribution(t *testing.T) {
	logits := []float32{1.0, 2.0, 0.5, -1.0, 3.0, 2.5, 0.0, 1.5}
	for _, tc := range []struct {
		name string
		p    Params
	}{
		{"softmax", Params{Temperature: 1, Seed: 11}},
		{"temperature 0.7", Params{Temperature: 0.7, Seed: 12}},
		{"temperature 2", Params{Temperature: 2, Seed: 13}},
		{"top-k 4", Params{Temperature: 1, TopK: 4, Seed: 14}},
		{"top-p 0.8", Params{Temperature: 1, TopP: 0.8, Seed: 15}},
		{"top-k 6 top-p 0.9", Params{Temperature: 1.3, TopK: 6, TopP: 0.9, Seed: 16}},
		{"min-p 0.1", Params{Temperature: 1, MinP: 0.1, Seed: 17}},
		{"all filters", Params{Temperature: 1.2, TopK: 6, TopP: 0.95, MinP: 0.15, Seed: 18}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := refDist(logits, tc.p)
			chi, df := chiSquare(t, New(tc.p, nil), logits, want, 20000)
			if df == 0 {
				t.Fatalf("reference keeps one token; pick other parameters")
			}
			if chi > chiCrit[df] {
				t.Errorf("chi-square %.2f > %.2f (df %d): sampled frequencies do not match %v", chi, chiCrit[df], df, want)
			}
		})
	}
}

func TestMinPFilters(t *testing.T) {
	// probs ∝ 1, e^-1, e^-2, e^-5: min-p 0.2 keeps tokens 0 and 1 (e^-1 =
	// 0.37 >= 0.2, e^-2 = 0.135 < 0.2).
	logits := []float32{0, -1, -2, -5}
	s := New(Params{Temperature: 1, MinP: 0.2, Seed: 5}, nil)
	seen := map[int32]int{}
	for range 2000 {
		seen[s.Sample(logits).Token]++
	}
	if len(seen) != 2 || seen[0] == 0 || seen[1] == 0 {
		t.Errorf("min-p 0.2 sampled %v, want only tokens 0 and 1, both", seen)
	}
}

func TestPenalties(t *testing.T) {
	base := []float32{2, -2, 1, -1, 0.5, 3}
	for _, tc := range []struct {
		name   string
		p      Params
		prompt []int32
		gen    []int32 // accepted generated tokens
		want   []float32
	}{
		{"off", Params{}, []int32{0, 1}, []int32{2}, base},
		{"repetition over prompt and generated", Params{RepetitionPenalty: 2}, []int32{0, 1}, []int32{2, 2},
			[]float32{1, -4, 0.5, -1, 0.5, 3}},
		{"repetition window 2", Params{RepetitionPenalty: 2, PenaltyLastN: 2}, []int32{0, 1, 3}, []int32{4},
			[]float32{2, -2, 1, -2, 0.25, 3}},
		{"repetition whole sequence", Params{RepetitionPenalty: 2, PenaltyLastN: -1},
			[]int32{0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
				0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
			nil, []float32{1, -4, 0.5, -2, 0.25, 3}},
		{"default window drops old prompt tokens", Params{RepetitionPenalty: 2},
			append([]int32{5}, make([]int32, 64)...), nil, []float32{1, -2, 1, -1, 0.5, 3}},
		{"presence ignores prompt", Params{PresencePenalty: 0.5}, []int32{0, 1}, []int32{2, 2, 5},
			[]float32{2, -2, 0.5, -1, 0.5, 2.5}},
		{"frequency counts", Params{FrequencyPenalty: 0.25}, nil, []int32{2, 2, 5},
			[]float32{2, -2, 0.5, -1, 0.5, 2.75}},
		{"negative presence encourages", Params{PresencePenalty: -1}, nil, []int32{1},
			[]float32{2, -1, 1, -1, 0.5, 3}},
		{"all", Params{RepetitionPenalty: 2, PresencePenalty: 0.5, FrequencyPenalty: 0.25}, []int32{0}, []int32{5},
			[]float32{1, -2, 1, -1, 0.5, 0.75}},
		{"out of range ids ignored", Params{RepetitionPenalty: 2, PresencePenalty: 1}, []int32{-1, 100}, []int32{77},
			base},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.p, tc.prompt)
			for _, tok := range tc.gen {
				s.Accept(tok)
			}
			got := slices.Clone(base)
			s.applyPenalties(got)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
				t.Errorf("penalized logits (-want +got):\n%s", diff)
			}
		})
	}
}

// Greedy sampling sees the penalties: a repeated top token loses.
func TestGreedyAppliesPenalties(t *testing.T) {
	s := New(Params{RepetitionPenalty: 4}, []int32{0})
	if got := s.Sample([]float32{2, 1}).Token; got != 1 {
		t.Errorf("token %d, want 1 (token 0 penalized to 0.5)", got)
	}
}

func TestLogprobs(t *testing.T) {
	logits := []float32{1.0, 2.0, 0.5, -1.0, 3.0, 2.5, 0.0, 1.5}
	var z float64
	for _, v := range logits {
		z += math.Exp(float64(v))
	}
	ref := func(tok int32) float32 { return float32(float64(logits[tok]) - math.Log(z)) }
	// Penalties and temperature must not change the reported logprobs.
	s := New(Params{Temperature: 0.5, RepetitionPenalty: 3, PresencePenalty: 1, Logprobs: true, TopLogprobs: 8, Seed: 1},
		[]int32{4, 5})
	for range 5 {
		res := s.Sample(logits)
		if d := math.Abs(float64(res.Logprob - ref(res.Token))); d > 1e-6 {
			t.Errorf("logprob of %d = %v, want %v", res.Token, res.Logprob, ref(res.Token))
		}
		var want []TokenLogprob
		for _, tok := range []int32{4, 5, 1, 7, 0, 2, 6, 3} {
			want = append(want, TokenLogprob{tok, ref(tok)})
		}
		if diff := cmp.Diff(want, res.Top, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
			t.Errorf("top logprobs (-want +got):\n%s", diff)
		}
		var sum float64
		for _, tl := range res.Top {
			sum += math.Exp(float64(tl.Logprob))
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("exp(logprobs) over the whole vocabulary sums to %v, want 1", sum)
		}
	}

	// Large vocabulary, top 5: sorted, ties by id, chosen token's logprob
	// matches, and the top 5 mass is at most 1.
	r := rand.New(rand.NewPCG(3, 3))
	big := randLogits(r, 32000, 3)
	big[100], big[200] = 50, 50
	res := New(Params{Logprobs: true, TopLogprobs: 5}, nil).Sample(big)
	if res.Token != 100 || len(res.Top) != 5 || res.Top[0].Token != 100 || res.Top[1].Token != 200 {
		t.Fatalf("result %+v: want token 100 and top [100 200 ...]", res)
	}
	if res.Logprob != res.Top[0].Logprob {
		t.Errorf("chosen logprob %v != top[0] %v", res.Logprob, res.Top[0].Logprob)
	}
	var mass float64
	for i, tl := range res.Top {
		mass += math.Exp(float64(tl.Logprob))
		if i > 0 && tl.Logprob > res.Top[i-1].Logprob {
			t.Errorf("top not sorted: %+v", res.Top)
		}
	}
	if mass > 1+1e-5 || mass < 0.99 {
		t.Errorf("top-5 mass %v, want about 1 (two logits at 50)", mass)
	}

	// No logprobs requested: none reported.
	if res := New(Params{}, nil).Sample(logits); res.Logprob != 0 || res.Top != nil {
		t.Errorf("logprobs reported without being asked: %+v", res)
	}
}

func TestSelectTopMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{1, 2, 3, 10, 1000, 5000} {
		v := randLogits(r, n, 1)
		// Add ties.
		for i := 0; i < n; i += 7 {
			v[i] = 0.5
		}
		sorted := iota32(make([]int32, n))
		sortBest(sorted, v)
		for _, k := range []int{1, 2, 5, 64, n / 2, n - 1, n} {
			if k <= 0 || k > n {
				continue
			}
			idx := iota32(make([]int32, n))
			selectTop(idx, v, k)
			got := slices.Clone(idx[:k])
			sortBest(got, v)
			if diff := cmp.Diff(sorted[:k], got); diff != "" {
				t.Errorf("n=%d k=%d: top-k set differs (-sort +select):\n%s", n, k, diff)
			}
			got = slices.Clone(topK(v, k, make([]int32, n)))
			sortBest(got, v)
			if diff := cmp.Diff(sorted[:k], got); diff != "" {
				t.Errorf("n=%d k=%d: top-k set differs (-sort +topK):\n%s", n, k, diff)
			}
		}
	}
}

func TestTopPAllMatchesFullSort(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	for _, tc := range []struct {
		n     int
		scale float32
		topP  float64
	}{{32000, 0.5, 0.9}, {32000, 3, 0.9}, {32000, 8, 0.5}, {1000, 0.01, 0.99}, {100, 1, 0.999999}} {
		work := randLogits(r, tc.n, tc.scale)
		p := Params{Temperature: 1, TopP: float32(tc.topP)}
		want := refDist(work, p)
		s := New(p, nil)
		s.ensure(tc.n)
		var z float64
		weight := s.weight[:tc.n]
		mx := work[Argmax(work)]
		for i, v := range work {
			weight[i] = float32(math.Exp(float64(v - mx)))
			z += float64(weight[i])
		}
		got := topPAll(iota32(s.idx[:tc.n]), work, weight, tc.topP*z)
		if len(got) != len(want) {
			t.Errorf("n=%d scale=%v top-p %v: kept %d tokens, reference %d", tc.n, tc.scale, tc.topP, len(got), len(want))
			continue
		}
		for _, tok := range got {
			if want[tok] == 0 {
				t.Errorf("n=%d: kept token %d not in the reference set", tc.n, tok)
			}
		}
	}
}

func TestLargeVocabSupport(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	logits := randLogits(r, 32000, 4)
	for _, p := range []Params{
		{Temperature: 0.8, TopK: 40, TopP: 0.9, Seed: 1},
		{Temperature: 1, TopP: 0.5, Seed: 2},
		{Temperature: 1, MinP: 0.05, Seed: 3},
		{Temperature: 1, TopK: 10, MinP: 0.3, Seed: 4},
	} {
		want := refDist(logits, p)
		s := New(p, nil)
		for range 200 {
			if tok := s.Sample(logits).Token; want[tok] == 0 {
				t.Errorf("%+v: sampled %d outside the reference set (size %d)", p, tok, len(want))
				break
			}
		}
	}
}

func TestEdgeLogits(t *testing.T) {
	inf := float32(math.Inf(1))
	ninf := float32(math.Inf(-1))
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name   string
		logits []float32
		want   int32
	}{
		{"all -inf", []float32{ninf, ninf, ninf}, 0},
		{"one +inf", []float32{1, inf, 2}, 1},
		{"nan and one finite", []float32{nan, nan, 0}, 2},
		{"masked but one", []float32{ninf, 3, ninf}, 1},
	} {
		for _, p := range []Params{{}, {Temperature: 1, Logprobs: true, TopLogprobs: 2}, {Temperature: 1, TopK: 2, TopP: 0.5}} {
			if got := New(p, nil).Sample(tc.logits).Token; got != tc.want {
				t.Errorf("%s %+v: token %d, want %d", tc.name, p, got, tc.want)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		p    Params
		ok   bool
	}{
		{"zero", Params{}, true},
		{"typical", Params{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, RepetitionPenalty: 1.1,
			PresencePenalty: -2, FrequencyPenalty: 2, Logprobs: true, TopLogprobs: 20, PenaltyLastN: -1}, true},
		{"negative temperature", Params{Temperature: -1}, false},
		{"nan temperature", Params{Temperature: nan}, false},
		{"negative top_k", Params{TopK: -1}, false},
		{"top_k above vocab is fine", Params{TopK: 1 << 20}, true},
		{"top_p > 1", Params{TopP: 1.01}, false},
		{"top_p < 0", Params{TopP: -0.1}, false},
		{"min_p > 1", Params{MinP: 2}, false},
		{"min_p nan", Params{MinP: nan}, false},
		{"negative repetition", Params{RepetitionPenalty: -1}, false},
		{"temperature at its bound", Params{Temperature: MaxTemperature}, true},
		{"temperature over its bound", Params{Temperature: MaxTemperature + 1}, false},
		{"repetition over its bound", Params{RepetitionPenalty: MaxRepetitionPenalty + 1}, false},
		{"presence 3", Params{PresencePenalty: 3}, false},
		{"frequency -3", Params{FrequencyPenalty: -3}, false},
		{"top logprobs 21", Params{TopLogprobs: 21}, false},
		{"top logprobs -1", Params{TopLogprobs: -1}, false},
		{"top logprobs above vocab", Params{TopLogprobs: 20, Logprobs: true}, false},
		{"penalty_last_n -2", Params{PenaltyLastN: -2}, false},
	} {
		vocab := 32000
		if tc.name == "top logprobs above vocab" {
			vocab = 10
		}
		err := tc.p.Validate(vocab)
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%s: error %v does not wrap ErrInvalidParams", tc.name, err)
		}
	}
	var pe *ParamError
	if err := (Params{TopP: 7}).Validate(10); !errors.As(err, &pe) || pe.Field != "top_p" {
		t.Errorf("top_p 7: %v, want a ParamError naming top_p", err)
	}
	if err := (Params{}).Validate(0); err == nil {
		t.Errorf("Validate(0) accepted an empty vocabulary")
	}
}

func TestSampleAllocations(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	logits := randLogits(r, 32000, 2)
	s := New(Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 1}, nil)
	s.Sample(logits)
	if a := testing.AllocsPerRun(20, func() { s.Sample(logits) }); a != 0 {
		t.Errorf("Sample allocates %v times per call after warm-up, want 0", a)
	}
}

func benchSample(b *testing.B, p Params) {
	r := rand.New(rand.NewPCG(1, 1))
	logits := randLogits(r, 32000, 3)
	s := New(p, []int32{1, 2, 3, 4, 5})
	b.ReportAllocs()
	for b.Loop() {
		s.Sample(logits)
	}
}

func BenchmarkGreedy32k(b *testing.B) { benchSample(b, Params{}) }
func BenchmarkTopK40TopP32k(b *testing.B) {
	benchSample(b, Params{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 1})
}
func BenchmarkTopPOnly32k(b *testing.B) {
	benchSample(b, Params{Temperature: 0.8, TopP: 0.95, Seed: 1})
}
func BenchmarkTemperature32k(b *testing.B) { benchSample(b, Params{Temperature: 1, Seed: 1}) }
func BenchmarkPenaltiesMinP32k(b *testing.B) {
	benchSample(b, Params{Temperature: 1, MinP: 0.05, RepetitionPenalty: 1.1, PresencePenalty: 0.5, Seed: 1})
}
func BenchmarkLogprobsTop5_32k(b *testing.B) {
	benchSample(b, Params{Logprobs: true, TopLogprobs: 5})
}

// onlyEven allows even tokens only, and records what it accepted.
type onlyEven struct{ got *[]int32 }

func (c onlyEven) NewState() ConstraintState { return c }
func (c onlyEven) Allowed() []uint64 {
	return []uint64{0x5555555555555555, 0x5555555555555555}
}
func (c onlyEven) Accept(tok int32) error {
	*c.got = append(*c.got, tok)
	if tok%2 != 0 {
		return errors.New("odd")
	}
	return nil
}

func TestConstraintMasksBeforeSampling(t *testing.T) {
	logits := make([]float32, 100)
	for i := range logits {
		logits[i] = float32(i % 7)
	}
	logits[99] = 50 // the best token overall is odd and must never be drawn
	for _, temp := range []float32{0, 1} {
		var got []int32
		s := New(Params{Temperature: temp, Seed: 3, Logprobs: true, TopLogprobs: 3, Constraint: onlyEven{&got}}, nil)
		for range 20 {
			res := s.Sample(logits)
			if res.Token%2 != 0 {
				t.Fatalf("T=%v: sampled odd token %d", temp, res.Token)
			}
			for _, tl := range res.Top {
				if tl.Token%2 != 0 {
					t.Fatalf("T=%v: top logprobs hold odd token %d", temp, tl.Token)
				}
			}
		}
		if len(got) != 20 {
			t.Fatalf("T=%v: constraint saw %d tokens, want 20", temp, len(got))
		}
		if s.ConstraintErr() != nil {
			t.Fatal(s.ConstraintErr())
		}
		s.Accept(5)
		if s.ConstraintErr() == nil {
			t.Error("Accept of a refused token left no error")
		}
	}
}

// onlyToken allows one token.
type onlyToken int32

func (c onlyToken) NewState() ConstraintState { return c }
func (c onlyToken) Allowed() []uint64 {
	m := make([]uint64, 2)
	m[c/64] |= 1 << (c % 64)
	return m
}
func (c onlyToken) Accept(int32) error { return nil }

// TestConstraintOverridesSuppress: when the constraint allows only a
// suppressed token (a complete output may only end), the token is drawn
// anyway instead of a token the constraint refuses.
func TestConstraintOverridesSuppress(t *testing.T) {
	logits := make([]float32, 100)
	for _, temp := range []float32{0, 1} {
		s := New(Params{Temperature: temp, Suppress: []int32{2}, SuppressUntil: 10, Constraint: onlyToken(2)}, nil)
		if got := s.Sample(logits).Token; got != 2 {
			t.Errorf("T=%v: got %d, want 2", temp, got)
		}
		s = New(Params{Temperature: temp, Suppress: []int32{2}, SuppressUntil: 10, Constraint: onlyToken(3)}, nil)
		if got := s.Sample(logits).Token; got != 3 {
			t.Errorf("T=%v: got %d, want 3", temp, got)
		}
	}
}
