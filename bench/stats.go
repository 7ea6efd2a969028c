package bench

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 <= p <= 100) of xs by linear
// interpolation between closest ranks: with xs sorted ascending and
// h = (n-1)*p/100, the result is xs[floor(h)] + (h-floor(h)) *
// (xs[floor(h)+1]-xs[floor(h)]). This is NumPy's default ("linear", type 7
// of Hyndman and Fan), the method vLLM's benchmark reports with, so p0 is the
// minimum, p100 the maximum and p50 the usual median. xs need not be sorted
// and is not modified. It returns 0 for an empty slice.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []float64, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	p = math.Max(0, math.Min(100, p))
	h := float64(len(s)-1) * p / 100
	lo := int(math.Floor(h))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[lo] + (h-float64(lo))*(s[lo+1]-s[lo])
}

// Summary is the distribution of one latency, in milliseconds.
type Summary struct {
	// N is the number of observations (0 means every figure is 0).
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Summarize returns the mean, percentiles (see Percentile) and maximum of xs.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Summary{
		N:    len(s),
		Mean: sum / float64(len(s)),
		P50:  percentileSorted(s, 50),
		P90:  percentileSorted(s, 90),
		P99:  percentileSorted(s, 99),
		Max:  s[len(s)-1],
	}
}

// ms converts a duration to float milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
