package bench

import (
	"sort"
	"strconv"
	"time"
)

// ChunkTime is one streamed chunk as the client saw it.
type ChunkTime struct {
	// At is when the chunk arrived, measured from when the request was sent.
	At time.Duration
	// Tokens is how many token ids the chunk carried (one or more).
	Tokens int
}

// Record is what the load generator observed for one request.
type Record struct {
	// Index numbers the request in issue order (warm-up requests excluded).
	Index int
	// PromptTokens is the prompt length sent.
	PromptTokens int
	// OutputLen is the requested number of output tokens (max_tokens).
	OutputLen int
	// Sent is when the request was sent, measured from the start of the run.
	Sent time.Duration
	// Chunks lists every chunk message in arrival order.
	Chunks []ChunkTime
	// End is when the final message arrived, measured from Sent.
	End time.Duration
	// OutputTokens is the completion token count the final message reported.
	OutputTokens int
	// QueueWait is the server's queue time from the final message's timings.
	QueueWait time.Duration
	// DraftTokens and AcceptedDraftTokens are the server's speculative
	// decoding counts from the final message's timings (gRPC; 0 when the
	// server does not speculate or over the OpenAI protocol).
	DraftTokens, AcceptedDraftTokens int
	// Finish is the final message's finish reason ("eos", "length",
	// "stop_sequence"; over the OpenAI protocol "stop" or "length");
	// empty when no final message arrived.
	Finish string
	// Target is the address of the server that took the request (the RPC's
	// peer); empty when the stream never reached one.
	Target string
	// Err is set when the request failed (RPC error, error finish reason,
	// or a stream that does not match what was asked); a failed request
	// contributes to no latency figure.
	Err error
}

// TTFT is the client-side time to first token: from sending the request to
// the arrival of the first chunk. ok is false when no chunk arrived.
func (r *Record) TTFT() (d time.Duration, ok bool) {
	if len(r.Chunks) == 0 {
		return 0, false
	}
	return r.Chunks[0].At, true
}

// TPOT is the time per output token after the first:
// (End - TTFT) / (OutputTokens - 1), as vLLM defines it. ok is false for
// requests with fewer than two output tokens (they have no TPOT; goodput
// counts them as meeting any TPOT target).
func (r *Record) TPOT() (d time.Duration, ok bool) {
	ttft, ok := r.TTFT()
	if !ok || r.OutputTokens < 2 {
		return 0, false
	}
	return (r.End - ttft) / time.Duration(r.OutputTokens-1), true
}

// ITLs returns the inter-token latencies of the request: the gap between
// each chunk message and the one before it. Following vLLM's benchmark, a
// chunk that carries k tokens contributes its gap ONCE (not k gaps of
// gap/k): ITL measures how long a client waits between updates. A request
// whose tokens all came in one chunk has no ITL. TPOT, which divides by
// tokens, is the per-token figure.
func (r *Record) ITLs() []time.Duration {
	if len(r.Chunks) < 2 {
		return nil
	}
	out := make([]time.Duration, 0, len(r.Chunks)-1)
	for i := 1; i < len(r.Chunks); i++ {
		out = append(out, r.Chunks[i].At-r.Chunks[i-1].At)
	}
	return out
}

// Latencies are the latency distributions of a set of requests, in ms.
type Latencies struct {
	// Requests is how many successful requests these figures cover.
	Requests int `json:"requests"`
	// OutputTokens is their total output.
	OutputTokens int     `json:"output_tokens"`
	TTFT         Summary `json:"ttft_ms"`
	TPOT         Summary `json:"tpot_ms"`
	ITL          Summary `json:"itl_ms"`
	E2E          Summary `json:"e2e_ms"`
	// Queue is the server-reported queue wait (arrival to first admission).
	Queue Summary `json:"queue_ms"`
}

// SLO is a latency target for goodput; a zero field is not checked.
type SLO struct {
	TTFT time.Duration
	TPOT time.Duration
}

// Enabled reports whether any target is set.
func (s SLO) Enabled() bool { return s.TTFT > 0 || s.TPOT > 0 }

// Meets reports whether a successful request met every set target. A request
// with no TPOT (one output token) meets any TPOT target.
func (s SLO) Meets(r *Record) bool {
	if r.Err != nil {
		return false
	}
	if s.TTFT > 0 {
		ttft, ok := r.TTFT()
		if !ok || ttft > s.TTFT {
			return false
		}
	}
	if s.TPOT > 0 {
		if tpot, ok := r.TPOT(); ok && tpot > s.TPOT {
			return false
		}
	}
	return true
}

// Goodput is the rate of requests that met the SLO.
type Goodput struct {
	SLOTTFTms float64 `json:"slo_ttft_ms,omitempty"`
	SLOTPOTms float64 `json:"slo_tpot_ms,omitempty"`
	// Good is how many requests met every target.
	Good int `json:"good_requests"`
	// Fraction is Good over all measured requests (failed ones included).
	Fraction float64 `json:"fraction"`
	// RequestsPerSecond is Good over the run's duration.
	RequestsPerSecond float64 `json:"request_throughput"`
}

// samples holds the successful records' latencies in milliseconds.
type samples struct {
	requests, outputTokens      int
	ttft, tpot, itl, e2e, queue []float64
}

// collect gathers the latency samples of the successful records.
func collect(recs []Record) samples {
	var s samples
	for i := range recs {
		r := &recs[i]
		if r.Err != nil {
			continue
		}
		s.requests++
		s.outputTokens += r.OutputTokens
		if d, ok := r.TTFT(); ok {
			s.ttft = append(s.ttft, ms(d))
		}
		if d, ok := r.TPOT(); ok {
			s.tpot = append(s.tpot, ms(d))
		}
		for _, d := range r.ITLs() {
			s.itl = append(s.itl, ms(d))
		}
		s.e2e = append(s.e2e, ms(r.End))
		s.queue = append(s.queue, ms(r.QueueWait))
	}
	return s
}

// Aggregate summarizes the successful records.
func Aggregate(recs []Record) Latencies {
	s := collect(recs)
	return Latencies{
		Requests: s.requests, OutputTokens: s.outputTokens,
		TTFT: Summarize(s.ttft), TPOT: Summarize(s.tpot), ITL: Summarize(s.itl),
		E2E: Summarize(s.e2e), Queue: Summarize(s.queue),
	}
}

// ComputeGoodput counts the records meeting slo over a run of the given
// duration.
func ComputeGoodput(recs []Record, slo SLO, duration time.Duration) Goodput {
	g := Goodput{SLOTTFTms: ms(slo.TTFT), SLOTPOTms: ms(slo.TPOT)}
	for i := range recs {
		if slo.Meets(&recs[i]) {
			g.Good++
		}
	}
	if len(recs) > 0 {
		g.Fraction = float64(g.Good) / float64(len(recs))
	}
	if duration > 0 {
		g.RequestsPerSecond = float64(g.Good) / duration.Seconds()
	}
	return g
}

// ByOutputLen groups the records by requested output length and aggregates
// each group; keys are the lengths in decimal.
func ByOutputLen(recs []Record) map[string]Latencies {
	groups := map[int][]Record{}
	for _, r := range recs {
		groups[r.OutputLen] = append(groups[r.OutputLen], r)
	}
	out := make(map[string]Latencies, len(groups))
	for n, g := range groups {
		out[strconv.Itoa(n)] = Aggregate(g)
	}
	return out
}

// sortedLenKeys returns the keys of a ByOutputLen map in numeric order.
func sortedLenKeys(m map[string]Latencies) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, _ := strconv.Atoi(keys[i])
		b, _ := strconv.Atoi(keys[j])
		return a < b
	})
	return keys
}
