package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/weft-inference/weft/scheduler"
)

// metrics are the server's Prometheus series, named weft_* with vLLM's
// meanings. Gauges and totals read the scheduler's latest Stats snapshot
// at scrape time. The per-request histograms (TTFT, TPOT, e2e, queue
// time, success) are the Door's, labelled by front door.
type metrics struct {
	iteration prometheus.Histogram
	rejected  *prometheus.CounterVec // requests refused before admission, by ErrorInfo reason
}

func newMetrics(reg prometheus.Registerer, stats func() scheduler.Stats, kv KVCache) (*metrics, error) {
	m := &metrics{
		iteration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "weft_iteration_tokens_total", Help: "Tokens per scheduler step (sampled from Stats by SampleStats).",
			Buckets: []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192},
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weft_requests_rejected_total", Help: "Requests (and chat turns) refused before admission, by ErrorInfo reason.",
		}, []string{"reason"}),
	}
	gauge := func(name, help string, f func(scheduler.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(stats()) })
	}
	counter := func(name, help string, f func(scheduler.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return f(stats()) })
	}
	cs := []prometheus.Collector{
		m.iteration, m.rejected,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		gauge("weft_num_requests_running", "Requests in the running batch.", func(s scheduler.Stats) float64 { return float64(s.Running) }),
		gauge("weft_num_requests_waiting", "Requests waiting for admission.", func(s scheduler.Stats) float64 { return float64(s.Waiting) }),
		gauge("weft_kv_cache_usage_perc", "Fraction of KV blocks held by running requests (1 = full).", kvUsage),
		kvBlocks(stats, "used", func(s scheduler.Stats) int { return s.KVBlocksUsed }),
		kvBlocks(stats, "cached", func(s scheduler.Stats) int { return s.KVBlocksCached }),
		kvBlocks(stats, "free", func(s scheduler.Stats) int { return s.KVBlocksFree }),
		cacheConfigInfo(kv),
		counter("weft_num_preemptions_total", "Preemptions since start.", func(s scheduler.Stats) float64 { return float64(s.Preemptions) }),
		counter("weft_prompt_tokens_total", "Prompt tokens processed since start.", func(s scheduler.Stats) float64 { return float64(s.PromptTokens) }),
		counter("weft_generation_tokens_total", "Tokens generated since start.", func(s scheduler.Stats) float64 { return float64(s.GenerationTokens) }),
		counter("weft_spec_draft_tokens_total", "Tokens drafted for speculative decoding since start.", func(s scheduler.Stats) float64 { return float64(s.SpecDraftTokens) }),
		counter("weft_spec_accepted_tokens_total", "Drafted tokens accepted by verification since start (also counted in weft_generation_tokens_total).", func(s scheduler.Stats) float64 { return float64(s.SpecAcceptedTokens) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// cacheConfigInfo is weft_cache_config_info{block_size, num_gpu_blocks} = 1,
// the KV pool's shape for a prefix-aware Endpoint Picker (the Gateway API
// Inference Extension's model-server protocol; num_gpu_blocks is the pool's
// block count whatever the backend).
func cacheConfigInfo(kv KVCache) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "weft_cache_config_info", Help: "KV cache configuration (value 1): tokens per block and blocks in the pool.",
	}, []string{"block_size", "num_gpu_blocks"})
	g.WithLabelValues(strconv.Itoa(kv.BlockSize), strconv.Itoa(kv.NumBlocks)).Set(1)
	return g
}

// kvBlocks is weft_kv_cache_blocks{state}: the ledger's blocks in one
// state. used + cached + free is the ledger (Stats.KVBlocksTotal), so a
// block held by no request shows up as used.
func kvBlocks(stats func() scheduler.Stats, state string, f func(scheduler.Stats) int) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "weft_kv_cache_blocks",
		Help:        "KV blocks of the ledger by state: used (held by running requests), cached (free, holding a reusable prefix), free.",
		ConstLabels: prometheus.Labels{"state": state},
	}, func() float64 { return float64(f(stats())) })
}

func kvUsage(s scheduler.Stats) float64 {
	if s.KVBlocksTotal == 0 {
		return 0
	}
	return float64(s.KVBlocksUsed) / float64(s.KVBlocksTotal)
}

// MetricsHandler serves the Prometheus metrics (mount it at /metrics).
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{Registry: s.cfg.Registry})
}

// SampleStats feeds weft_iteration_tokens_total from the scheduler's Stats
// every interval (one observation per new step seen) until ctx ends.
func (s *Server) SampleStats(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			st := s.cfg.Scheduler.Stats()
			if st.Steps != last && st.LastBatchTokens > 0 {
				s.metrics.iteration.Observe(float64(st.LastBatchTokens))
			}
			last = st.Steps
		}
	}
}

// refuse counts err in weft_requests_rejected_total and returns its status:
// for every refusal before admission.
func (s *Server) refuse(err error) error {
	s.metrics.rejected.WithLabelValues(rejectReason(err)).Inc()
	return Status(err)
}

// rejectReason is the ErrorInfo reason err's status carries.
func rejectReason(err error) string {
	for _, d := range toStatus(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.GetReason()
		}
	}
	return ReasonInternal
}
