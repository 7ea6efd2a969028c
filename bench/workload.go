package bench

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// LengthDist draws token counts. Next is given the request's own random
// source and its index, so a draw depends only on (seed, index).
type LengthDist interface {
	Next(r *rand.Rand, index int) int
	// Max is the largest value Next can return.
	Max() int
	String() string
}

// Fixed always returns N.
type Fixed struct{ N int }

func (f Fixed) Next(*rand.Rand, int) int { return f.N }
func (f Fixed) Max() int                 { return f.N }
func (f Fixed) String() string           { return strconv.Itoa(f.N) }

// Uniform draws uniformly from [Lo, Hi], both included.
type Uniform struct{ Lo, Hi int }

func (u Uniform) Next(r *rand.Rand, _ int) int { return u.Lo + r.IntN(u.Hi-u.Lo+1) }
func (u Uniform) Max() int                     { return u.Hi }
func (u Uniform) String() string               { return fmt.Sprintf("%d-%d", u.Lo, u.Hi) }

// LogNormal draws exp(N(ln Median, Sigma²)) rounded to the nearest integer
// and clamped to [Lo, Hi]: most requests short, a long tail of long ones,
// the shape of chat traffic (ShareGPT's prompt and reply lengths are roughly
// lognormal).
type LogNormal struct {
	Median float64
	Sigma  float64
	Lo, Hi int
}

func (l LogNormal) Next(r *rand.Rand, _ int) int {
	v := int(math.Round(l.Median * math.Exp(l.Sigma*r.NormFloat64())))
	return min(max(v, l.Lo), l.Hi)
}
func (l LogNormal) Max() int { return l.Hi }
func (l LogNormal) String() string {
	return fmt.Sprintf("lognormal:%g,%g,%d,%d", l.Median, l.Sigma, l.Lo, l.Hi)
}

// Cycle returns Lens[index mod len(Lens)]: requests cycle through exactly
// these lengths in order (the --output-lens workload).
type Cycle struct{ Lens []int }

func (c Cycle) Next(_ *rand.Rand, index int) int {
	i := index % len(c.Lens)
	if i < 0 {
		i += len(c.Lens)
	}
	return c.Lens[i]
}
func (c Cycle) Max() int { return max(0, slicesMax(c.Lens)) }
func (c Cycle) String() string {
	s := make([]string, len(c.Lens))
	for i, n := range c.Lens {
		s[i] = strconv.Itoa(n)
	}
	return "cycle:" + strings.Join(s, ",")
}

func slicesMax(xs []int) int {
	m := math.MinInt
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// ParseLengthDist parses a length specification:
//
//	"128"                        fixed
//	"32-256"                     uniform over [32, 256]
//	"lognormal:MEDIAN,SIGMA"     lognormal, clamped to [1, 8*MEDIAN]
//	"lognormal:MEDIAN,SIGMA,MIN,MAX"
//	"cycle:6,50,300"             cycle through the lengths in order
func ParseLengthDist(s string) (LengthDist, error) {
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(s, "lognormal:"):
		parts := strings.Split(strings.TrimPrefix(s, "lognormal:"), ",")
		if len(parts) != 2 && len(parts) != 4 {
			return nil, fmt.Errorf("length %q: want lognormal:MEDIAN,SIGMA[,MIN,MAX]", s)
		}
		med, err1 := strconv.ParseFloat(parts[0], 64)
		sig, err2 := strconv.ParseFloat(parts[1], 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("length %q: %w", s, err)
		}
		if med < 1 || sig < 0 {
			return nil, fmt.Errorf("length %q: need MEDIAN >= 1 and SIGMA >= 0", s)
		}
		l := LogNormal{Median: med, Sigma: sig, Lo: 1, Hi: int(math.Ceil(8 * med))}
		if len(parts) == 4 {
			lo, err1 := strconv.Atoi(parts[2])
			hi, err2 := strconv.Atoi(parts[3])
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("length %q: %w", s, err)
			}
			l.Lo, l.Hi = lo, hi
		}
		if l.Lo < 1 || l.Hi < l.Lo {
			return nil, fmt.Errorf("length %q: need 1 <= MIN <= MAX", s)
		}
		return l, nil
	case strings.HasPrefix(s, "cycle:"):
		return ParseCycle(strings.TrimPrefix(s, "cycle:"))
	case strings.Contains(s, "-"):
		lo, hi, _ := strings.Cut(s, "-")
		a, err1 := strconv.Atoi(strings.TrimSpace(lo))
		b, err2 := strconv.Atoi(strings.TrimSpace(hi))
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("length %q: %w", s, err)
		}
		if a < 1 || b < a {
			return nil, fmt.Errorf("length %q: need 1 <= MIN <= MAX", s)
		}
		return Uniform{Lo: a, Hi: b}, nil
	default:
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("length %q: %w", s, err)
		}
		if n < 1 {
			return nil, fmt.Errorf("length %q: must be >= 1", s)
		}
		return Fixed{N: n}, nil
	}
}

// ParseCycle parses a comma-separated list of lengths ("6,50,300").
func ParseCycle(s string) (Cycle, error) {
	var c Cycle
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return Cycle{}, fmt.Errorf("lengths %q: %w", s, err)
		}
		if n < 1 {
			return Cycle{}, fmt.Errorf("lengths %q: each must be >= 1", s)
		}
		c.Lens = append(c.Lens, n)
	}
	return c, nil
}

// Preset workloads selectable by name (--workload).
var Presets = map[string]struct{ Prompt, Output string }{
	// chat: a chat-like mix, lognormal prompts and replies with long tails.
	"chat": {Prompt: "lognormal:48,0.8,4,256", Output: "lognormal:48,0.9,2,256"},
	// seed: the seed's case, short prompts, replies cycling 6, 50, 300.
	"seed": {Prompt: "16", Output: "cycle:6,50,300"},
}

// Spec is one request to send.
type Spec struct {
	// Index numbers the request; warm-up requests have negative indexes.
	Index int
	// Prompt is the prompt as token ids, BOS first when the model has one;
	// nil for a text prompt.
	Prompt []int32
	// Text is the prompt as text (Workload.Words); "" for token ids.
	Text string
	// OutputLen is the number of tokens to generate (max_tokens).
	OutputLen int
}

// Workload generates request specs. Request(i) depends only on the seed and
// i, so a run is repeatable whatever order the requests are sent in.
type Workload struct {
	// Seed makes the run repeatable.
	Seed uint64
	// PromptLen draws prompt lengths (BOS included).
	PromptLen LengthDist
	// OutputLen draws output lengths.
	OutputLen LengthDist
	// Vocab holds the token ids prompts are drawn from; not empty unless
	// Words is set.
	Vocab []int32
	// Words, when set, makes text prompts instead: PromptLen words drawn
	// from Words, joined by spaces (the server tokenizes them, so the
	// prompt's token count is the server's, read from its usage).
	Words []string
	// BOS is prepended to every prompt when >= 0.
	BOS int32
	// MaxTotal, when > 0, caps prompt+output (the model's context length):
	// prompts are shortened to fit.
	MaxTotal int
	// Copy makes prompt-copy requests (Config.PromptCopy). Request(i)
	// draws a seed prompt Q as usual, shortened so that Q G Q and the
	// output fit MaxTotal; once Continuations holds i it returns the
	// prompt Q G Q instead, with the same output length.
	Copy bool
	// Continuations holds, by request index, the server's own greedy
	// continuation G of the request's seed prompt (fillContinuations).
	Continuations map[int]Continuation
}

// Continuation is a server's output for a seed prompt: its token ids
// (gRPC) or its text (OpenAI).
type Continuation struct {
	Tokens []int32
	Text   string
}

func (w *Workload) validate() error {
	switch {
	case w.PromptLen == nil || w.OutputLen == nil:
		return errors.New("workload: prompt and output lengths are required")
	case len(w.Vocab) == 0 && len(w.Words) == 0:
		return errors.New("workload: no vocabulary to draw prompts from")
	case w.MaxTotal > 0 && w.OutputLen.Max() >= w.MaxTotal:
		return fmt.Errorf("workload: output length up to %d does not fit the context (%d tokens) with a prompt",
			w.OutputLen.Max(), w.MaxTotal)
	case w.Copy && w.MaxTotal > 0 && 2*w.OutputLen.Max()+2 > w.MaxTotal:
		return fmt.Errorf("workload: a prompt copy holds its output twice; output length up to %d does not fit the context (%d tokens)",
			w.OutputLen.Max(), w.MaxTotal)
	}
	return nil
}

// Request returns the i-th request: with Copy and a continuation G of
// the seed prompt Q, the prompt Q G Q (token ids: Q's BOS once, at the
// start; text: Q, G as the server wrote it, a space, Q), so that a model
// that repeats its prompt continues with G again.
func (w *Workload) Request(i int) Spec {
	s := w.seed(i)
	g, ok := w.Continuations[i]
	if !w.Copy || !ok {
		return s
	}
	if s.Prompt == nil {
		s.Text = s.Text + g.Text + " " + s.Text
		return s
	}
	q := s.Prompt
	body := q
	if w.BOS >= 0 {
		body = q[1:]
	}
	p := make([]int32, 0, len(q)+len(g.Tokens)+len(body))
	s.Prompt = append(append(append(p, q...), g.Tokens...), body...)
	return s
}

// seed draws the i-th request's prompt and output length.
func (w *Workload) seed(i int) Spec {
	r := rand.New(rand.NewPCG(w.Seed, uint64(i)))
	out := w.OutputLen.Next(r, i)
	n := w.PromptLen.Next(r, i)
	switch {
	case w.MaxTotal <= 0:
	case w.Copy && 2*n+2*out > w.MaxTotal: // Q G Q, then G again
		n = max(1, (w.MaxTotal-2*out)/2)
	case n+out > w.MaxTotal:
		n = max(1, w.MaxTotal-out)
	}
	if len(w.Words) > 0 {
		words := make([]string, n)
		for k := range words {
			words[k] = w.Words[r.IntN(len(w.Words))]
		}
		return Spec{Index: i, Text: strings.Join(words, " "), OutputLen: out}
	}
	p := make([]int32, 0, n)
	if w.BOS >= 0 {
		p = append(p, w.BOS)
	}
	for len(p) < n {
		p = append(p, w.Vocab[r.IntN(len(w.Vocab))])
	}
	return Spec{Index: i, Prompt: p, OutputLen: out}
}

// PromptWords are the words of text prompts: short, common English words,
// one token or a few in most vocabularies.
var PromptWords = strings.Fields(`the a and to of in was he she it they little big cat dog girl boy
	day sun tree park ball home happy sad play run saw said with on for one time there went
	friend mom dad bird fish red blue green good new old toy box book cake water sky`)

// Arrivals draws the gaps between request arrivals of an open-loop run:
// gamma-distributed with mean 1/Rate and shape Burstiness. Burstiness 1 is a
// Poisson process (exponential gaps); below 1 arrivals come in bursts, above
// 1 they are more evenly spaced. This is vLLM's --burstiness.
type Arrivals struct {
	Rate       float64 // requests per second, > 0
	Burstiness float64 // gamma shape, > 0
	r          *rand.Rand
}

// NewArrivals returns an arrival process seeded for repeatability.
func NewArrivals(rate, burstiness float64, seed uint64) (*Arrivals, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return nil, fmt.Errorf("arrivals: rate %v must be a positive number", rate)
	}
	if !(burstiness > 0) || math.IsInf(burstiness, 0) {
		return nil, fmt.Errorf("arrivals: burstiness %v must be a positive number", burstiness)
	}
	return &Arrivals{Rate: rate, Burstiness: burstiness,
		r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}, nil
}

// Next returns the gap before the next arrival.
func (a *Arrivals) Next() time.Duration {
	scale := 1 / (a.Rate * a.Burstiness)
	return time.Duration(gamma(a.r, a.Burstiness) * scale * float64(time.Second))
}

// gamma draws from Gamma(shape, 1) by Marsaglia and Tsang's method (2000),
// with the x·U^(1/shape) boost for shape < 1.
func gamma(r *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := r.Float64()
		for u == 0 {
			u = r.Float64()
		}
		return gamma(r, shape+1) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
