package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is the outcome of a run, the object `weft bench --format json`
// prints. Latency figures are in milliseconds.
type Result struct {
	// Model is the served model's name (GetModelInfo).
	Model string `json:"model,omitempty"`
	// Mode describes how load was offered ("closed, concurrency 8" or
	// "open, 4 req/s, burstiness 1").
	Mode string `json:"mode"`
	// Workload describes the prompt and output length distributions.
	Workload string `json:"workload"`
	// Seed is the seed the workload and arrivals were drawn with.
	Seed uint64 `json:"seed"`
	// Warmup is how many warm-up requests ran first (not counted).
	Warmup int `json:"warmup"`
	// Requests is how many measured requests were sent.
	Requests int `json:"requests"`
	// Completed is how many of them succeeded.
	Completed int `json:"completed"`
	// Failed is how many failed; a run with Failed > 0 is a failed run.
	Failed int `json:"failed"`
	// Errors lists up to 10 distinct failure messages.
	Errors []string `json:"errors,omitempty"`
	// DurationS is the measured phase, from its first request sent to its
	// last final message, in seconds.
	DurationS float64 `json:"duration_s"`
	// RequestThroughput is completed requests per second.
	RequestThroughput float64 `json:"request_throughput"`
	// OutputTokensPerSecond is generated tokens (of completed requests) per second.
	OutputTokensPerSecond float64 `json:"output_tokens_per_second"`
	// InputTokensPerSecond is prompt tokens (of completed requests) per second.
	InputTokensPerSecond float64 `json:"input_tokens_per_second"`
	TotalInputTokens     int     `json:"total_input_tokens"`
	TotalOutputTokens    int     `json:"total_output_tokens"`
	// DraftTokens and AcceptedDraftTokens total the completed requests'
	// speculative decoding (server-reported; absent when it drafted
	// nothing); AcceptedDraftTokens/DraftTokens is the acceptance rate.
	DraftTokens         int `json:"draft_tokens,omitempty"`
	AcceptedDraftTokens int `json:"accepted_draft_tokens,omitempty"`
	// FinishReasons counts the completed requests by finish reason
	// (Record.Finish): with ignore_eos every one is "length"; with a
	// response format, "eos" when the constraint accepted and "length"
	// when max_tokens cut the output first.
	FinishReasons map[string]int `json:"finish_reasons,omitempty"`
	// ResponseFormat is the response format sent on every request, as
	// protojson; empty when none.
	ResponseFormat string `json:"response_format,omitempty"`

	TTFT  Summary `json:"ttft_ms"`
	TPOT  Summary `json:"tpot_ms"`
	ITL   Summary `json:"itl_ms"`
	E2E   Summary `json:"e2e_ms"`
	Queue Summary `json:"queue_ms"`

	// ByOutputLen has the latencies per requested output length, keyed by
	// the length in decimal, when the output lengths cycle (--output-lens).
	ByOutputLen map[string]Latencies `json:"by_output_len,omitempty"`
	// Goodput is set when an SLO was given.
	Goodput *Goodput `json:"goodput,omitempty"`
	// ByTarget counts the requests and output tokens each server took,
	// keyed by its address (the RPC's peer), when there is more than one.
	ByTarget map[string]TargetShare `json:"by_target,omitempty"`

	// Records are the per-request observations (not printed).
	Records []Record `json:"-"`
}

// NewResult aggregates recs, measured over duration; slo adds goodput and
// byLen the per-output-length breakdown.
func NewResult(recs []Record, duration time.Duration, slo SLO, byLen bool) Result {
	r := Result{Records: recs, Requests: len(recs), DurationS: duration.Seconds()}
	seen := map[string]bool{}
	for i := range recs {
		if err := recs[i].Err; err != nil {
			r.Failed++
			if msg := err.Error(); !seen[msg] && len(r.Errors) < 10 {
				seen[msg] = true
				r.Errors = append(r.Errors, msg)
			}
			continue
		}
		r.Completed++
		r.TotalInputTokens += recs[i].PromptTokens
		if f := recs[i].Finish; f != "" {
			if r.FinishReasons == nil {
				r.FinishReasons = map[string]int{}
			}
			r.FinishReasons[f]++
		}
	}
	for i := range recs {
		if recs[i].Err == nil {
			r.DraftTokens += recs[i].DraftTokens
			r.AcceptedDraftTokens += recs[i].AcceptedDraftTokens
		}
	}
	l := Aggregate(recs)
	r.TotalOutputTokens = l.OutputTokens
	r.TTFT, r.TPOT, r.ITL, r.E2E, r.Queue = l.TTFT, l.TPOT, l.ITL, l.E2E, l.Queue
	if s := duration.Seconds(); s > 0 {
		r.RequestThroughput = float64(r.Completed) / s
		r.OutputTokensPerSecond = float64(r.TotalOutputTokens) / s
		r.InputTokensPerSecond = float64(r.TotalInputTokens) / s
	}
	if byLen {
		r.ByOutputLen = ByOutputLen(recs)
	}
	r.ByTarget = byTarget(recs)
	if slo.Enabled() {
		g := ComputeGoodput(recs, slo, duration)
		r.Goodput = &g
	}
	return r
}

// TargetShare is one server's part of a run.
type TargetShare struct {
	// Requests is how many measured requests it took (failed ones included).
	Requests int `json:"requests"`
	// OutputTokens is what its completed requests generated.
	OutputTokens int `json:"output_tokens"`
}

// byTarget splits recs by Record.Target; nil unless there are two or more.
func byTarget(recs []Record) map[string]TargetShare {
	m := map[string]TargetShare{}
	for _, rec := range recs {
		if rec.Target == "" {
			continue
		}
		s := m[rec.Target]
		s.Requests++
		if rec.Err == nil {
			s.OutputTokens += rec.OutputTokens
		}
		m[rec.Target] = s
	}
	if len(m) < 2 {
		return nil
	}
	return m
}

// WriteTable prints r as a human-readable table.
func (r *Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }
	if r.Model != "" {
		p("model\t%s\n", r.Model)
	}
	p("load\t%s\n", r.Mode)
	p("workload\t%s (seed %d)\n", r.Workload, r.Seed)
	if r.ResponseFormat != "" {
		p("response format\t%s\n", r.ResponseFormat)
	}
	p("requests\t%d measured (+%d warm-up), %d completed, %d failed\n", r.Requests, r.Warmup, r.Completed, r.Failed)
	p("duration\t%.2f s\n", r.DurationS)
	p("throughput\t%.2f req/s, %.1f output tok/s, %.1f input tok/s\n",
		r.RequestThroughput, r.OutputTokensPerSecond, r.InputTokensPerSecond)
	if r.DraftTokens > 0 {
		p("speculation	%d of %d drafted tokens accepted (%.1f%%)\n", r.AcceptedDraftTokens, r.DraftTokens,
			100*float64(r.AcceptedDraftTokens)/float64(r.DraftTokens))
	}
	if len(r.FinishReasons) > 0 {
		var fr []string
		for _, k := range slices.Sorted(maps.Keys(r.FinishReasons)) {
			fr = append(fr, fmt.Sprintf("%s %d", k, r.FinishReasons[k]))
		}
		p("finish\t%s\n", strings.Join(fr, ", "))
	}
	for _, t := range slices.Sorted(maps.Keys(r.ByTarget)) {
		p("target %s\t%d requests, %d output tokens\n", t, r.ByTarget[t].Requests, r.ByTarget[t].OutputTokens)
	}
	if g := r.Goodput; g != nil {
		p("goodput\t%.2f req/s (%d of %d requests, %.1f%%, meet ttft<=%gms tpot<=%gms; 0 = unchecked)\n",
			g.RequestsPerSecond, g.Good, r.Requests, 100*g.Fraction, g.SLOTTFTms, g.SLOTPOTms)
	}
	p("\n")
	p("latency (ms)\tmean\tp50\tp90\tp99\tmax\tn\n")
	row := func(name string, s Summary) {
		p("%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\n", name, s.Mean, s.P50, s.P90, s.P99, s.Max, s.N)
	}
	row("ttft", r.TTFT)
	row("tpot", r.TPOT)
	row("itl", r.ITL)
	row("e2e", r.E2E)
	row("queue (server)", r.Queue)
	for _, k := range sortedLenKeys(r.ByOutputLen) {
		l := r.ByOutputLen[k]
		p("\noutput_len=%s (%d requests)\tmean\tp50\tp90\tp99\tmax\tn\n", k, l.Requests)
		row("ttft", l.TTFT)
		row("tpot", l.TPOT)
		row("e2e", l.E2E)
		row("queue (server)", l.Queue)
	}
	for _, e := range r.Errors {
		p("error\t%s\n", strings.ReplaceAll(e, "\n", " "))
	}
	return tw.Flush()
}

// SweepPoint is one run of a request-rate sweep.
type SweepPoint struct {
	// Rate is the offered load in requests per second.
	Rate   float64 `json:"rate"`
	Result Result  `json:"result"`
}

// WriteSweepTable prints one line per rate: achieved throughput and the
// latency percentiles that show where the server saturates.
func WriteSweepTable(w io.Writer, pts []SweepPoint) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "rate\treq/s\ttok/s\tttft p50\tttft p99\ttpot p50\ttpot p99\te2e p50\te2e p99\tqueue p99\tgoodput\tfailed\t\n")
	for _, p := range pts {
		r := &p.Result
		good := "-"
		if r.Goodput != nil {
			good = fmt.Sprintf("%.2f", r.Goodput.RequestsPerSecond)
		}
		fmt.Fprintf(tw, "%g\t%.2f\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t%s\t%d\t\n",
			p.Rate, r.RequestThroughput, r.OutputTokensPerSecond, r.TTFT.P50, r.TTFT.P99,
			r.TPOT.P50, r.TPOT.P99, r.E2E.P50, r.E2E.P99, r.Queue.P99, good, r.Failed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "(rate, req/s, goodput: requests per second; tok/s: output tokens per second; latencies in ms)")
	return err
}
