package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
)

// Comparison sets a candidate run (A, say continuous batching) against a
// baseline (B, say static batching) on the same workload. Every ratio is
// oriented so that > 1 means A is better: throughputs are A/B, latencies
// B/A ("how many times lower A's latency is"). A ratio whose denominator is
// zero is reported as 0.
type Comparison struct {
	A string `json:"a"`
	B string `json:"b"`
	// OutputThroughput is A's output tokens/s over B's.
	OutputThroughput float64 `json:"output_throughput_ratio"`
	// RequestThroughput is A's requests/s over B's.
	RequestThroughput float64 `json:"request_throughput_ratio"`
	// TTFTp50 and TTFTp99 are B's TTFT percentile over A's.
	TTFTp50 float64 `json:"ttft_p50_ratio"`
	TTFTp99 float64 `json:"ttft_p99_ratio"`
	// TPOTp50 is B's median TPOT over A's.
	TPOTp50 float64 `json:"tpot_p50_ratio"`
	// E2Ep50 is B's median end-to-end latency over A's.
	E2Ep50 float64 `json:"e2e_p50_ratio"`
	// ShortestLen is the shortest requested output length of the
	// --output-lens breakdown (0 when neither run has one), and
	// ShortestE2Ep50 B's median end-to-end latency for those requests over A's.
	ShortestLen    int     `json:"shortest_output_len,omitempty"`
	ShortestE2Ep50 float64 `json:"shortest_e2e_p50_ratio,omitempty"`
	// Goodput is A's goodput over B's when both runs had an SLO.
	Goodput float64 `json:"goodput_ratio,omitempty"`
}

func ratio(num, den float64) float64 {
	if den == 0 || math.IsNaN(num) || math.IsNaN(den) {
		return 0
	}
	return num / den
}

// Compare computes the ratios of run a over baseline b.
func Compare(aName string, a Result, bName string, b Result) Comparison {
	c := Comparison{
		A: aName, B: bName,
		OutputThroughput:  ratio(a.OutputTokensPerSecond, b.OutputTokensPerSecond),
		RequestThroughput: ratio(a.RequestThroughput, b.RequestThroughput),
		TTFTp50:           ratio(b.TTFT.P50, a.TTFT.P50),
		TTFTp99:           ratio(b.TTFT.P99, a.TTFT.P99),
		TPOTp50:           ratio(b.TPOT.P50, a.TPOT.P50),
		E2Ep50:            ratio(b.E2E.P50, a.E2E.P50),
	}
	if keys := sortedLenKeys(a.ByOutputLen); len(keys) > 0 {
		if lb, ok := b.ByOutputLen[keys[0]]; ok {
			c.ShortestLen, _ = strconv.Atoi(keys[0])
			c.ShortestE2Ep50 = ratio(lb.E2E.P50, a.ByOutputLen[keys[0]].E2E.P50)
		}
	}
	if a.Goodput != nil && b.Goodput != nil {
		c.Goodput = ratio(a.Goodput.RequestsPerSecond, b.Goodput.RequestsPerSecond)
	}
	return c
}

// WriteTable prints the comparison with the raw figures beside each ratio.
func (c Comparison) WriteTable(w io.Writer, a, b Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }
	p("figure\t%s\t%s\tratio (>1: %s better)\n", c.A, c.B, c.A)
	p("output tok/s\t%.1f\t%.1f\t%.2fx\n", a.OutputTokensPerSecond, b.OutputTokensPerSecond, c.OutputThroughput)
	p("requests/s\t%.2f\t%.2f\t%.2fx\n", a.RequestThroughput, b.RequestThroughput, c.RequestThroughput)
	p("ttft p50 ms\t%.1f\t%.1f\t%.2fx\n", a.TTFT.P50, b.TTFT.P50, c.TTFTp50)
	p("ttft p99 ms\t%.1f\t%.1f\t%.2fx\n", a.TTFT.P99, b.TTFT.P99, c.TTFTp99)
	p("tpot p50 ms\t%.2f\t%.2f\t%.2fx\n", a.TPOT.P50, b.TPOT.P50, c.TPOTp50)
	p("e2e p50 ms\t%.1f\t%.1f\t%.2fx\n", a.E2E.P50, b.E2E.P50, c.E2Ep50)
	if c.ShortestLen > 0 {
		k := strconv.Itoa(c.ShortestLen)
		p("e2e p50 ms, %d-token requests\t%.1f\t%.1f\t%.2fx\n", c.ShortestLen,
			a.ByOutputLen[k].E2E.P50, b.ByOutputLen[k].E2E.P50, c.ShortestE2Ep50)
	}
	if a.Goodput != nil && b.Goodput != nil {
		p("goodput req/s\t%.2f\t%.2f\t%.2fx\n", a.Goodput.RequestsPerSecond, b.Goodput.RequestsPerSecond, c.Goodput)
	}
	return tw.Flush()
}
