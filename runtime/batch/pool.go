package batch

import (
	"fmt"
	"math"
)

// Pooling is how an embedding is made from the hidden states of a text's
// tokens (SeqStep.Hidden).
type Pooling int

const (
	// PoolingUnset is the zero value: no choice made.
	PoolingUnset Pooling = iota
	// PoolMean is the mean of every token's hidden state.
	PoolMean
	// PoolLast is the last token's hidden state: under causal attention
	// the only one that has seen the whole text.
	PoolLast
	// PoolCLS is the first token's hidden state (BERT's [CLS]).
	PoolCLS
)

// String is the pooling's name: "mean", "last", "cls" ("unset" for the
// zero value).
func (p Pooling) String() string {
	switch p {
	case PoolMean:
		return "mean"
	case PoolLast:
		return "last"
	case PoolCLS:
		return "cls"
	case PoolingUnset:
		return "unset"
	}
	return fmt.Sprintf("Pooling(%d)", int(p))
}

// ParsePooling reads a pooling's name: mean, last or cls.
func ParsePooling(s string) (Pooling, error) {
	switch s {
	case "mean":
		return PoolMean, nil
	case "last":
		return PoolLast, nil
	case "cls":
		return PoolCLS, nil
	}
	return PoolingUnset, fmt.Errorf("pooling %q: want mean, last or cls", s)
}

// PoolingOfType maps the value of a GGUF file's <arch>.pooling_type key
// (llama.cpp's numbering: 0 none, 1 mean, 2 cls, 3 last, 4 rank) to a
// Pooling. ok is false for none, rank and unknown values: they name no
// pooling of hidden states into one vector, and the caller falls back to
// its own choice.
func PoolingOfType(v int64) (p Pooling, ok bool) {
	switch v {
	case 1:
		return PoolMean, true
	case 2:
		return PoolCLS, true
	case 3:
		return PoolLast, true
	}
	return PoolingUnset, false
}

// Pool folds the hidden states of one sequence, fed in token order over
// any number of steps, into its embedding. Its result depends only on the
// rows fed and their order, never on how they were split into steps: the
// mean is summed in float64, one token after the other.
type Pool struct {
	how   Pooling
	width int
	acc   []float64 // mean: the running sum; last and cls: the kept row
	n     int       // tokens fed
}

// NewPool returns an empty pool of rows of width values.
func NewPool(how Pooling, width int) *Pool {
	return &Pool{how: how, width: width, acc: make([]float64, width)}
}

// Add feeds rows, len(rows)/width consecutive tokens' hidden states.
func (p *Pool) Add(rows []float32) {
	W := p.width
	for r := 0; (r+1)*W <= len(rows); r++ {
		row := rows[r*W : (r+1)*W]
		switch p.how {
		case PoolMean:
			for i, v := range row {
				p.acc[i] += float64(v)
			}
		case PoolLast:
			for i, v := range row {
				p.acc[i] = float64(v)
			}
		case PoolCLS:
			if p.n == 0 {
				for i, v := range row {
					p.acc[i] = float64(v)
				}
			}
		}
		p.n++
	}
}

// Reset empties the pool (the sequence is computed again from its start).
func (p *Pool) Reset() {
	clear(p.acc)
	p.n = 0
}

// Tokens is the number of tokens fed since the last Reset.
func (p *Pool) Tokens() int { return p.n }

// Vector is the pooled embedding scaled to unit L2 norm (all zeros when
// the pooled vector is zero, nil when no token was fed).
func (p *Pool) Vector() []float32 {
	if p.n == 0 {
		return nil
	}
	out := make([]float32, p.width)
	div := 1.0
	if p.how == PoolMean {
		div = float64(p.n)
	}
	var ss float64
	for _, v := range p.acc {
		ss += (v / div) * (v / div)
	}
	if ss == 0 {
		return out
	}
	inv := 1 / math.Sqrt(ss)
	for i, v := range p.acc {
		out[i] = float32(v / div * inv)
	}
	return out
}
