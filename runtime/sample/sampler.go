package sample

import (
	"math"
	"math/rand/v2"
	"slices"
)

// DefaultPenaltyLastN is the repetition-penalty window used when
// Params.PenaltyLastN is 0 (llama.cpp's penalty_last_n default).
const DefaultPenaltyLastN = 64

// MaxTopLogprobs is the largest Params.TopLogprobs that Validate accepts
// (the OpenAI API limit).
const MaxTopLogprobs = 20

// Sampler holds the sampling state of one sequence: its parameters, the
// token history the penalties need, and scratch buffers sized to the
// vocabulary. It is not safe for concurrent use; the scheduler owns one per
// sequence and calls it from the step loop.
type Sampler struct {
	p     Params
	lastN int // resolved repetition window; -1: whole sequence

	// Repetition-penalty history: ring holds the last lastN tokens (unused
	// when lastN < 0), inWin counts each token inside the window.
	ring  []int32
	rpos  int
	inWin map[int32]int32
	// gen counts generated tokens (presence/frequency penalties).
	gen map[int32]int32
	// nGen is the number of generated (sampled or accepted) tokens; it
	// selects the random stream of the next draw.
	nGen uint64

	pcg rand.PCG
	rng *rand.Rand

	// cons is the sequence's constraint state (nil: unconstrained); cerr
	// the first token it refused.
	cons ConstraintState
	cerr error

	// Scratch, vocabulary-sized, allocated on first use and reused.
	work   []float32 // penalized logits
	masked []float32 // raw logits under the constraint's mask (logprobs)
	weight []float32 // unnormalized probabilities by token id
	idx    []int32   // candidate token ids
}

// New returns the sampler of one sequence whose prompt is prompt. The prompt
// fills the repetition-penalty window; it does not count as generated text
// for the presence and frequency penalties. p should have passed Validate;
// New does not check it again.
func New(p Params, prompt []int32) *Sampler {
	s := &Sampler{p: p, lastN: p.PenaltyLastN}
	if s.lastN == 0 {
		s.lastN = DefaultPenaltyLastN
	}
	if s.repetitionOn() {
		s.inWin = make(map[int32]int32)
		if s.lastN > 0 {
			// The ring grows by append up to lastN: a huge window costs
			// only what the sequence really holds.
			s.ring = make([]int32, 0, min(s.lastN, len(prompt)+64))
			if len(prompt) > s.lastN {
				prompt = prompt[len(prompt)-s.lastN:]
			}
		}
		for _, t := range prompt {
			s.pushWindow(t)
		}
	}
	if s.p.PresencePenalty != 0 || s.p.FrequencyPenalty != 0 {
		s.gen = make(map[int32]int32)
	}
	s.rng = rand.New(&s.pcg)
	if p.Constraint != nil {
		s.cons = p.Constraint.NewState()
	}
	return s
}

// ConstraintErr returns the first token the constraint refused (one that
// came through Accept from outside, not from Sample), or nil.
func (s *Sampler) ConstraintErr() error { return s.cerr }

// Generated returns how many tokens have been sampled or accepted.
func (s *Sampler) Generated() int { return int(s.nGen) }

func (s *Sampler) repetitionOn() bool {
	return s.p.RepetitionPenalty != 0 && s.p.RepetitionPenalty != 1
}

func (s *Sampler) pushWindow(t int32) {
	if s.lastN < 0 {
		s.inWin[t]++
		return
	}
	if len(s.ring) < s.lastN {
		s.ring = append(s.ring, t)
	} else {
		old := s.ring[s.rpos]
		if c := s.inWin[old] - 1; c > 0 {
			s.inWin[old] = c
		} else {
			delete(s.inWin, old)
		}
		s.ring[s.rpos] = t
		s.rpos = (s.rpos + 1) % s.lastN
	}
	s.inWin[t]++
}

// Accept records tok as the sequence's next generated token when the token
// did not come from Sample (a token forced from outside, or the tokens
// replayed into a Sampler rebuilt for a resumed sequence). Sample already
// records its own choice: do not Accept a token Sample returned.
//
// The random draw of generated token i depends only on Params.Seed and i, so
// New(p, prompt) followed by Accept of the tokens generated so far continues
// exactly as the original Sampler would have.
func (s *Sampler) Accept(tok int32) {
	if s.inWin != nil {
		s.pushWindow(tok)
	}
	if s.gen != nil {
		s.gen[tok]++
	}
	if s.cons != nil {
		if err := s.cons.Accept(tok); err != nil && s.cerr == nil {
			s.cerr = err
		}
	}
	s.nGen++
}

func (s *Sampler) ensure(n int) {
	if cap(s.work) < n {
		s.work = make([]float32, n)
		s.weight = make([]float32, n)
		s.idx = make([]int32, n)
	}
}

// Sample picks the next token from logits (one value per vocabulary entry)
// and records it (see Accept). It does not modify logits.
//
// The order is: repetition penalty (window of Params.PenaltyLastN tokens of
// prompt+generated text), presence and frequency penalties (generated
// tokens), then either greedy argmax (Temperature 0; ties go to the lowest
// id) or temperature, top-k, top-p, min-p and a draw from what is left with
// the sequence's seeded random stream.
//
// Result.Logprob and Result.Top are the log-softmax of the raw logits, before
// penalties, temperature and filters (vLLM's default): they describe what the
// model predicted, not the distribution that was sampled. They are filled
// only when Params.Logprobs is set or Params.TopLogprobs > 0.
//
// NaN logits are treated as -Inf. Sample panics if logits is empty (a
// caller bug).
func (s *Sampler) Sample(logits []float32) Result {
	n := len(logits)
	if n == 0 {
		panic("sample: Sample called with empty logits")
	}
	s.ensure(n)
	work := s.work[:n]
	for i, v := range logits {
		switch {
		case v != v: // NaN
			v = float32(math.Inf(-1))
		case v > math.MaxFloat32:
			v = math.MaxFloat32
		}
		work[i] = v
	}
	raw := logits
	if s.cons != nil {
		applyMask(work, s.cons.Allowed())
		if s.p.Logprobs || s.p.TopLogprobs > 0 {
			if cap(s.masked) < n {
				s.masked = make([]float32, n)
			}
			raw = s.masked[:n]
			copy(raw, logits)
			applyMask(raw, s.cons.Allowed())
		}
	}
	s.applyPenalties(work)
	if int(s.nGen) < s.p.SuppressUntil {
		// Under a constraint, suppression yields when it would leave no
		// token at all (a complete output that may only end): the
		// constraint wins over min_tokens.
		var saved []float32
		if s.cons != nil {
			saved = make([]float32, len(s.p.Suppress))
		}
		for i, t := range s.p.Suppress {
			if t >= 0 && int(t) < n {
				if saved != nil {
					saved[i] = work[t]
				}
				work[t] = float32(math.Inf(-1))
			}
		}
		if saved != nil && math.IsInf(float64(work[Argmax(work)]), -1) {
			for i, t := range s.p.Suppress {
				if t >= 0 && int(t) < n {
					work[t] = saved[i]
				}
			}
		}
	}

	var tok int32
	if s.p.Temperature == 0 {
		tok = Argmax(work)
	} else {
		tok = s.draw(work)
	}
	res := Result{Token: tok}
	if s.p.Logprobs || s.p.TopLogprobs > 0 {
		fillLogprobs(raw, &res, s.p.TopLogprobs)
	}
	s.Accept(tok)
	return res
}

// applyMask sets to -Inf every logit whose token's bit is clear in allow
// (tokens past the bitset count as clear).
func applyMask(work []float32, allow []uint64) {
	ninf := float32(math.Inf(-1))
	for w := 0; w*64 < len(work); w++ {
		var bits uint64
		if w < len(allow) {
			bits = allow[w]
		}
		if bits == ^uint64(0) {
			continue
		}
		end := min(len(work), w*64+64)
		for i := w * 64; i < end; i++ {
			if bits&(1<<(i-w*64)) == 0 {
				work[i] = ninf
			}
		}
	}
}

func (s *Sampler) applyPenalties(work []float32) {
	n := int32(len(work))
	if s.inWin != nil {
		rp := s.p.RepetitionPenalty
		for t := range s.inWin {
			if t < 0 || t >= n {
				continue
			}
			if v := work[t]; v > 0 {
				work[t] = v / rp
			} else {
				work[t] = v * rp
			}
		}
	}
	if s.gen != nil {
		for t, c := range s.gen {
			if t < 0 || t >= n {
				continue
			}
			work[t] -= float32(c)*s.p.FrequencyPenalty + s.p.PresencePenalty
		}
	}
}

// Argmax returns the index of the largest value, the lowest index on ties
// (NaNs are never larger): greedy decoding's choice. Tests and tools that
// decode greedily from raw logits use it rather than their own copy.
func Argmax(v []float32) int32 {
	best := 0
	for i := 1; i < len(v); i++ {
		if v[i] > v[best] {
			best = i
		}
	}
	return int32(best)
}

// draw applies temperature, top-k, top-p and min-p to work and samples.
func (s *Sampler) draw(work []float32) int32 {
	n := len(work)
	best := Argmax(work)
	mx := work[best]
	if math.IsInf(float64(mx), -1) {
		return best // every token is masked: nothing to draw from
	}
	invT := 1 / float64(s.p.Temperature)
	weight := s.weight[:n]
	// weightOf computes the unnormalized probability exp((x-max)/T); the
	// best token gets exactly 1.
	weightOf := func(t int32) float32 {
		return expNeg(float64(work[t]-mx) * invT)
	}

	// cand lists the surviving token ids; all reports that every token
	// survives (cand is then not built, to spare a pass over the vocabulary).
	var cand []int32
	all := true
	var zAll float64 // sum of all weights, when all are computed
	k := s.p.TopK
	topP := float64(s.p.TopP)
	usePTop := topP > 0 && topP < 1
	if k > 0 && k < n {
		cand = topK(work, k, s.idx[:n])
		all = false
		var z float64
		for _, t := range cand {
			w := weightOf(t)
			weight[t] = w
			z += float64(w)
		}
		if usePTop {
			sortBest(cand, work)
			cand = cutTopP(cand, weight, topP*z)
		}
	} else {
		for i := range weight {
			w := weightOf(int32(i))
			weight[i] = w
			zAll += float64(w)
		}
		if usePTop {
			cand = topPAll(iota32(s.idx[:n]), work, weight, topP*zAll)
			all = false
		}
	}

	if mp := s.p.MinP; mp > 0 {
		// The best token has weight 1, so the threshold is MinP itself.
		if all {
			cand = s.idx[:0]
			for i, w := range weight {
				if w >= mp {
					cand = append(cand, int32(i))
				}
			}
			all = false
		} else {
			kept := cand[:0]
			for _, t := range cand {
				if weight[t] >= mp {
					kept = append(kept, t)
				}
			}
			cand = kept
		}
	}

	s.pcg.Seed(streamSeed(s.p.Seed, s.nGen))
	u := s.rng.Float64()
	if all {
		target, acc := u*zAll, 0.0
		last := best
		for i, w := range weight {
			if w == 0 {
				continue
			}
			acc += float64(w)
			last = int32(i)
			if acc > target {
				return last
			}
		}
		return last
	}
	if len(cand) == 0 {
		return best
	}
	var z float64
	for _, t := range cand {
		z += float64(weight[t])
	}
	target, acc := u*z, 0.0
	for _, t := range cand {
		acc += float64(weight[t])
		if acc > target {
			return t
		}
	}
	return cand[len(cand)-1]
}

// cutTopP keeps the shortest prefix of cand (sorted best first) whose
// weights reach target, and at least one token.
func cutTopP(cand []int32, weight []float32, target float64) []int32 {
	var cum float64
	for j, t := range cand {
		cum += float64(weight[t])
		if cum >= target {
			return cand[:j+1]
		}
	}
	return cand
}

// topPAll is top-p over the whole vocabulary without sorting all of it: it
// selects and sorts the best m tokens and grows m until their mass reaches
// target. idx is scratch of len(work).
func topPAll(idx []int32, work, weight []float32, target float64) []int32 {
	n := len(idx)
	m := min(n, 64)
	for {
		topK(work, m, idx)
		sortBest(idx[:m], work)
		var cum float64
		for j, t := range idx[:m] {
			cum += float64(weight[t])
			if cum >= target {
				return idx[:j+1]
			}
		}
		if m == n {
			return idx[:n]
		}
		m = min(n, m*8)
	}
}

// heapTopK is the largest k for which topK uses a bounded heap rather than
// quickselect.
const heapTopK = 1024

// topK writes the ids of the k best tokens of v (see better) into out[:k],
// in no particular order, and returns out[:k]. out has len(v) elements and
// is scratch. For small k it scans v once with a k-element min-heap (most
// tokens cost one comparison); otherwise it uses quickselect.
func topK(v []float32, k int, out []int32) []int32 {
	n := len(v)
	if k >= n {
		return iota32(out[:n])
	}
	if k > heapTopK {
		selectTop(iota32(out[:n]), v, k)
		return out[:k]
	}
	// h is a heap whose root h[0] is the worst of the k best so far.
	h := iota32(out[:k])
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(h, v, i)
	}
	for i := k; i < n; i++ {
		// Token i has a higher id than everything in h, so it is better
		// than the root only with a strictly higher value.
		if v[i] > v[h[0]] {
			h[0] = int32(i)
			siftDown(h, v, 0)
		}
	}
	return h
}

// siftDown restores the heap order (worst at the root) below h[i].
func siftDown(h []int32, v []float32, i int) {
	n := len(h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && better(v, h[c], h[c+1]) {
			c++ // the worse child
		}
		if !better(v, h[i], h[c]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

func iota32(idx []int32) []int32 {
	for i := range idx {
		idx[i] = int32(i)
	}
	return idx
}

// better orders tokens by value, highest first, then by id, lowest first: a
// strict total order, so selection and sorting are deterministic.
func better(v []float32, a, b int32) bool {
	va, vb := v[a], v[b]
	return va > vb || (va == vb && a < b)
}

func sortBest(idx []int32, v []float32) {
	slices.SortFunc(idx, func(a, b int32) int {
		switch {
		case better(v, a, b):
			return -1
		case better(v, b, a):
			return 1
		}
		return 0
	})
}

// selectTop rearranges idx so that idx[:k] holds the k best tokens (in no
// particular order): quickselect, O(len(idx)) on average. v has no NaN.
func selectTop(idx []int32, v []float32, k int) {
	if k <= 0 || k >= len(idx) {
		return
	}
	kth := k - 1
	lo, hi := 0, len(idx)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		// Median of three as pivot.
		if better(v, idx[mid], idx[lo]) {
			idx[mid], idx[lo] = idx[lo], idx[mid]
		}
		if better(v, idx[hi], idx[lo]) {
			idx[hi], idx[lo] = idx[lo], idx[hi]
		}
		if better(v, idx[hi], idx[mid]) {
			idx[hi], idx[mid] = idx[mid], idx[hi]
		}
		pivot := idx[mid]
		i, j := lo, hi
		for i <= j {
			for better(v, idx[i], pivot) {
				i++
			}
			for better(v, pivot, idx[j]) {
				j--
			}
			if i <= j {
				idx[i], idx[j] = idx[j], idx[i]
				i++
				j--
			}
		}
		switch {
		case kth <= j:
			hi = j
		case kth >= i:
			lo = i
		default:
			return
		}
	}
}

// fillLogprobs sets res.Logprob and res.Top from the log-softmax of raw.
func fillLogprobs(raw []float32, res *Result, top int) {
	mx := float32(math.Inf(-1))
	for _, v := range raw {
		if v > mx {
			mx = v
		}
	}
	var sum float64
	for _, v := range raw {
		if v == v {
			sum += float64(expNeg(float64(v - mx)))
		}
	}
	lse := float64(mx) + math.Log(sum)
	lp := func(v float32) float32 {
		if v != v || math.IsInf(lse, 0) || math.IsNaN(lse) {
			return float32(math.Inf(-1))
		}
		return float32(float64(v) - lse)
	}
	res.Logprob = lp(raw[res.Token])
	if top <= 0 {
		return
	}
	top = min(top, len(raw))
	// Insertion into a small sorted buffer: O(len(raw)) for top <= 20.
	buf := make([]TokenLogprob, 0, top)
	for i, v := range raw {
		if v != v {
			continue
		}
		if len(buf) == top && v <= buf[top-1].Logprob {
			continue
		}
		j := len(buf)
		if j < top {
			buf = append(buf, TokenLogprob{})
		} else {
			j = top - 1
		}
		for j > 0 && buf[j-1].Logprob < v {
			buf[j] = buf[j-1]
			j--
		}
		buf[j] = TokenLogprob{Token: int32(i), Logprob: v}
	}
	for i := range buf {
		buf[i].Logprob = lp(buf[i].Logprob)
	}
	res.Top = buf
}

// streamSeed derives the PCG seed of the draw for generated token i from
// the request seed, so each draw depends on (seed, i) alone.
func streamSeed(seed, i uint64) (uint64, uint64) {
	hi := splitmix64(seed)
	return hi, splitmix64(hi ^ splitmix64(i))
}

// splitmix64 is Steele, Lea and Flood's SplitMix64 finalizer, used here as
// a seed scrambler.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
