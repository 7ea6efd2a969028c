package bench

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPercentile(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		p    float64
		want float64
	}{
		{"empty", nil, 50, 0},
		{"single", []float64{7}, 99, 7},
		{"min", []float64{3, 1, 2}, 0, 1},
		{"max", []float64{3, 1, 2}, 100, 3},
		{"median odd", []float64{5, 1, 3}, 50, 3},
		{"median even interpolates", []float64{4, 1, 3, 2}, 50, 2.5},
		// 1..10: h = 9*0.9 = 8.1 -> 9 + 0.1*(10-9)
		{"p90 of 1..10", []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 90, 9.1},
		// 1..10: h = 9*0.99 = 8.91 -> 9.91
		{"p99 of 1..10", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 99, 9.91},
		// 0..100: h = p exactly
		{"p99 of 0..100", seq(0, 100), 99, 99},
		{"p clamped high", []float64{1, 2}, 150, 2},
		{"p clamped low", []float64{1, 2}, -5, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]float64(nil), tt.xs...)
			got := Percentile(tt.xs, tt.p)
			if math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.xs, tt.p, got, tt.want)
			}
			if diff := cmp.Diff(in, tt.xs); diff != "" {
				t.Errorf("input modified (-before +after):\n%s", diff)
			}
		})
	}
}

func seq(lo, hi int) []float64 {
	var xs []float64
	for i := hi; i >= lo; i-- {
		xs = append(xs, float64(i))
	}
	return xs
}

func TestSummarize(t *testing.T) {
	got := Summarize(seq(1, 100))
	want := Summary{N: 100, Mean: 50.5, P50: 50.5, P90: 90.1, P99: 99.01, Max: 100}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Summarize(1..100) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Summary{}, Summarize(nil)); diff != "" {
		t.Errorf("Summarize(nil) (-want +got):\n%s", diff)
	}
}

// rec builds a record whose chunks arrive at the given ms offsets, with the
// given token count each, the final message at end ms.
func rec(outLen int, end float64, chunks ...ChunkTime) Record {
	n := 0
	for _, c := range chunks {
		n += c.Tokens
	}
	return Record{OutputLen: outLen, OutputTokens: n, Chunks: chunks, End: msd(end), PromptTokens: 4}
}

func msd(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }

func ct(atMs float64, tokens int) ChunkTime { return ChunkTime{At: msd(atMs), Tokens: tokens} }

func TestRecordMetrics(t *testing.T) {
	tests := []struct {
		name     string
		r        Record
		wantTTFT time.Duration
		ttftOK   bool
		wantTPOT time.Duration
		tpotOK   bool
		wantITL  []time.Duration
	}{
		{
			name:     "one token per chunk",
			r:        rec(4, 70, ct(10, 1), ct(30, 1), ct(50, 1), ct(70, 1)),
			wantTTFT: msd(10), ttftOK: true,
			wantTPOT: msd(20), tpotOK: true, // (70-10)/3
			wantITL: []time.Duration{msd(20), msd(20), msd(20)},
		},
		{
			// A chunk of 3 tokens counts its 40ms gap once, not 3 gaps of
			// 13.3ms; TPOT still divides by tokens: (60-10)/(5-1).
			name:     "multi-token chunk counted once",
			r:        rec(5, 60, ct(10, 1), ct(50, 3), ct(60, 1)),
			wantTTFT: msd(10), ttftOK: true,
			wantTPOT: msd(12.5), tpotOK: true,
			wantITL: []time.Duration{msd(40), msd(10)},
		},
		{
			name:     "single token has no tpot and no itl",
			r:        rec(1, 15, ct(12, 1)),
			wantTTFT: msd(12), ttftOK: true,
		},
		{
			name:     "all tokens in one chunk",
			r:        rec(3, 20, ct(20, 3)),
			wantTTFT: msd(20), ttftOK: true,
			wantTPOT: 0, tpotOK: true, // (20-20)/2
		},
		{
			name: "no chunk",
			r:    Record{End: msd(5)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ttft, ok := tt.r.TTFT()
			if ttft != tt.wantTTFT || ok != tt.ttftOK {
				t.Errorf("TTFT() = %v, %v; want %v, %v", ttft, ok, tt.wantTTFT, tt.ttftOK)
			}
			tpot, ok := tt.r.TPOT()
			if tpot != tt.wantTPOT || ok != tt.tpotOK {
				t.Errorf("TPOT() = %v, %v; want %v, %v", tpot, ok, tt.wantTPOT, tt.tpotOK)
			}
			if diff := cmp.Diff(tt.wantITL, tt.r.ITLs()); diff != "" {
				t.Errorf("ITLs() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAggregateSkipsFailures(t *testing.T) {
	recs := []Record{
		rec(2, 30, ct(10, 1), ct(30, 1)),
		rec(2, 50, ct(20, 1), ct(50, 1)),
		{OutputLen: 2, Err: errors.New("boom"), Chunks: []ChunkTime{ct(1, 1)}, End: msd(1)},
	}
	got := Aggregate(recs)
	want := Latencies{
		Requests: 2, OutputTokens: 4,
		TTFT:  Summary{N: 2, Mean: 15, P50: 15, P90: 19, P99: 19.9, Max: 20},
		TPOT:  Summary{N: 2, Mean: 25, P50: 25, P90: 29, P99: 29.9, Max: 30},
		ITL:   Summary{N: 2, Mean: 25, P50: 25, P90: 29, P99: 29.9, Max: 30},
		E2E:   Summary{N: 2, Mean: 40, P50: 40, P90: 48, P99: 49.8, Max: 50},
		Queue: Summary{N: 2},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Aggregate (-want +got):\n%s", diff)
	}
}

func TestGoodput(t *testing.T) {
	recs := []Record{
		rec(3, 30, ct(10, 1), ct(20, 1), ct(30, 1)), // ttft 10, tpot 10: good
		rec(3, 70, ct(50, 1), ct(60, 1), ct(70, 1)), // ttft 50: misses TTFT
		rec(3, 50, ct(10, 1), ct(30, 1), ct(50, 1)), // tpot 20: misses TPOT
		rec(1, 15, ct(15, 1)),                       // no TPOT: meets it
		{Err: errors.New("failed"), OutputLen: 3},   // failures never count
	}
	tests := []struct {
		name string
		slo  SLO
		want Goodput
	}{
		{"both", SLO{TTFT: msd(20), TPOT: msd(15)},
			Goodput{SLOTTFTms: 20, SLOTPOTms: 15, Good: 2, Fraction: 0.4, RequestsPerSecond: 1}},
		{"ttft only", SLO{TTFT: msd(20)},
			Goodput{SLOTTFTms: 20, Good: 3, Fraction: 0.6, RequestsPerSecond: 1.5}},
		{"tpot only", SLO{TPOT: msd(15)},
			Goodput{SLOTPOTms: 15, Good: 3, Fraction: 0.6, RequestsPerSecond: 1.5}},
		{"boundary is met", SLO{TTFT: msd(10), TPOT: msd(10)},
			Goodput{SLOTTFTms: 10, SLOTPOTms: 10, Good: 1, Fraction: 0.2, RequestsPerSecond: 0.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ComputeGoodput(recs, tt.slo, 2*time.Second)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("ComputeGoodput (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewResult(t *testing.T) {
	recs := []Record{
		rec(6, 30, ct(10, 1), ct(20, 4), ct(30, 1)),
		rec(50, 100, ct(10, 25), ct(100, 25)),
		{OutputLen: 6, Err: errors.New("rpc error: unavailable")},
		{OutputLen: 6, Err: errors.New("rpc error: unavailable")},
	}
	got := NewResult(recs, 2*time.Second, SLO{TTFT: msd(50)}, true)
	if got.Requests != 4 || got.Completed != 2 || got.Failed != 2 {
		t.Errorf("requests/completed/failed = %d/%d/%d, want 4/2/2", got.Requests, got.Completed, got.Failed)
	}
	if diff := cmp.Diff([]string{"rpc error: unavailable"}, got.Errors); diff != "" {
		t.Errorf("Errors (-want +got):\n%s", diff)
	}
	if got.TotalOutputTokens != 56 || got.OutputTokensPerSecond != 28 || got.RequestThroughput != 1 {
		t.Errorf("tokens %d, tok/s %v, req/s %v; want 56, 28, 1", got.TotalOutputTokens, got.OutputTokensPerSecond, got.RequestThroughput)
	}
	if diff := cmp.Diff([]string{"6", "50"}, sortedLenKeys(got.ByOutputLen)); diff != "" {
		t.Errorf("by_output_len keys (-want +got):\n%s", diff)
	}
	if l := got.ByOutputLen["6"]; l.Requests != 1 || l.E2E.P50 != 30 {
		t.Errorf("by_output_len[6] = %+v, want 1 request with e2e p50 30", l)
	}
	if got.Goodput == nil || got.Goodput.Good != 2 {
		t.Errorf("Goodput = %+v, want 2 good", got.Goodput)
	}
}

func TestCompare(t *testing.T) {
	a := Result{OutputTokensPerSecond: 300, RequestThroughput: 3, TTFT: Summary{P50: 10, P99: 20}, E2E: Summary{P50: 100},
		ByOutputLen: map[string]Latencies{"6": {E2E: Summary{P50: 5}}, "300": {E2E: Summary{P50: 500}}}}
	b := Result{OutputTokensPerSecond: 100, RequestThroughput: 1, TTFT: Summary{P50: 40, P99: 200}, E2E: Summary{P50: 400},
		ByOutputLen: map[string]Latencies{"6": {E2E: Summary{P50: 250}}, "300": {E2E: Summary{P50: 600}}}}
	got := Compare("continuous", a, "static", b)
	want := Comparison{A: "continuous", B: "static", OutputThroughput: 3, RequestThroughput: 3,
		TTFTp50: 4, TTFTp99: 10, E2Ep50: 4, ShortestLen: 6, ShortestE2Ep50: 50}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Compare (-want +got):\n%s", diff)
	}
}
