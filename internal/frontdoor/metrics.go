package frontdoor

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/weft-inference/weft/scheduler"
)

// Door labels: the front door a request came through (the "door" label
// of the per-request metrics).
const (
	DoorGRPC      = "grpc"
	DoorOpenAI    = "openai"
	DoorAnthropic = "anthropic"
	DoorResponses = "responses" // OpenAI's Responses API (package openai)
)

// metrics are the per-request Prometheus series (vLLM's meanings, weft_
// names), fed from each sequence's Final by Follow and labelled by door,
// so every door's requests count alike.
type metrics struct {
	ttft    *prometheus.HistogramVec // door
	tpot    *prometheus.HistogramVec // door
	e2e     *prometheus.HistogramVec // door
	queue   *prometheus.HistogramVec // door
	success *prometheus.CounterVec   // door, finished_reason
}

// LatencyBuckets are the buckets of the latency histograms (seconds).
var LatencyBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	door := []string{"door"}
	m := &metrics{
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "weft_time_to_first_token_seconds", Help: "Time from arrival to the first generated token, by front door.",
			Buckets: LatencyBuckets,
		}, door),
		tpot: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "weft_time_per_output_token_seconds", Help: "Mean time between generated tokens of a request, after the first, by front door.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5},
		}, door),
		e2e: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "weft_e2e_request_latency_seconds", Help: "Time from arrival to the end of generation, by front door.",
			Buckets: LatencyBuckets,
		}, door),
		queue: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "weft_request_queue_time_seconds", Help: "Time a request waited before its first admission, by front door.",
			Buckets: LatencyBuckets,
		}, door),
		success: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weft_request_success_total", Help: "Finished requests by front door and finish reason.",
		}, []string{"door", "finished_reason"}),
	}
	for _, c := range []prometheus.Collector{m.ttft, m.tpot, m.e2e, m.queue, m.success} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// FinishLabels are the finished_reason label values.
var FinishLabels = map[scheduler.FinishReason]string{
	scheduler.FinishEOS: "eos", scheduler.FinishLength: "length", scheduler.FinishStopSequence: "stop",
	scheduler.FinishCancelled: "cancelled", scheduler.FinishError: "error", scheduler.FinishTimeout: "timeout",
	scheduler.FinishEmbedded: "embedded",
}

var tracer = otel.Tracer("github.com/weft-inference/weft/internal/frontdoor")

// observe records one finished sequence of door, which arrived at start:
// the histograms, and spans for its queue wait, prefill and decode phases
// under ctx's span (the RPC's, when the door traces).
func (m *metrics) observe(ctx context.Context, door string, start time.Time, f *scheduler.Final) {
	end := time.Now()
	e2e := end.Sub(start)
	m.e2e.WithLabelValues(door).Observe(e2e.Seconds())
	m.queue.WithLabelValues(door).Observe(f.QueueWait.Seconds())
	m.success.WithLabelValues(door, FinishLabels[f.Reason]).Inc()
	if f.CompletionTokens > 0 && f.TTFT > 0 {
		m.ttft.WithLabelValues(door).Observe(f.TTFT.Seconds())
		if f.CompletionTokens > 1 {
			m.tpot.WithLabelValues(door).Observe((e2e - f.TTFT).Seconds() / float64(f.CompletionTokens-1))
		}
	}
	if !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	ctx = context.WithoutCancel(ctx)
	phase := func(name string, from, to time.Time, attrs ...attribute.KeyValue) {
		if to.Before(from) {
			return
		}
		_, sp := tracer.Start(ctx, name, trace.WithTimestamp(from), trace.WithAttributes(attrs...))
		sp.End(trace.WithTimestamp(to))
	}
	admitted := start.Add(f.QueueWait)
	phase("weft.queue", start, admitted)
	if f.TTFT > 0 {
		first := start.Add(f.TTFT)
		phase("weft.prefill", admitted, first,
			attribute.Int("weft.prompt_tokens", f.PromptTokens), attribute.Int("weft.cached_tokens", f.CachedTokens))
		phase("weft.decode", first, end, attribute.Int("weft.completion_tokens", f.CompletionTokens))
	}
}
