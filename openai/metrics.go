package openai

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-inference/weft/internal/frontdoor"
)

// metrics are the HTTP door's own metrics (by route and status code); the
// per-request ones (TTFT, TPOT, e2e, queue, success) are the Door's,
// labelled door="openai", and the scheduler's (queue, KV, tokens) the
// gRPC server's, counting both doors.
type metrics struct {
	requests    *prometheus.CounterVec   // path, code
	duration    *prometheus.HistogramVec // path
	slowReaders prometheus.Counter
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weft_http_requests_total",
			Help: "HTTP requests answered by the OpenAI-compatible API, by route and status code.",
		}, []string{"path", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weft_http_request_duration_seconds",
			Help:    "Time from an HTTP request's arrival to the end of its response (streams included), by route.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18), // 1 ms .. 131 s
		}, []string{"path"}),
		slowReaders: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weft_http_slow_reader_cutoffs_total",
			Help: "HTTP responses cut off because the client accepted nothing for the send stall timeout.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.slowReaders} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// RequestIDHeader is the header of a request's id
// (frontdoor.RequestIDHeader): the client's when valid, made up
// otherwise, sent back as a response header and added as request_id to
// every log line of the request.
const RequestIDHeader = frontdoor.RequestIDHeader

// statusWriter remembers the status code written; Unwrap lets
// http.ResponseController reach the connection (flush, deadlines).
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// observe gives each request its id, counts and times it by route and
// status, and logs one line when it ends (at debug for /health, so probes
// do not flood the log).
func (h *Handler) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, id := frontdoor.WithRequestID(r.Context(), r.Header.Get(RequestIDHeader))
		w.Header().Set(RequestIDHeader, id)
		r = r.WithContext(ctx)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		// r.Pattern is the route the mux matched ("POST /v1/completions"):
		// a bounded label set, unlike the raw path.
		path := "other"
		if _, p, ok := strings.Cut(r.Pattern, " "); ok {
			path = p
		}
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		d := time.Since(start)
		h.metrics.requests.WithLabelValues(path, strconv.Itoa(code)).Inc()
		h.metrics.duration.WithLabelValues(path).Observe(d.Seconds())
		lvl := slog.LevelInfo
		if path == "/health" {
			lvl = slog.LevelDebug
		}
		h.log.Log(r.Context(), lvl, "finished call", "protocol", "http", "method", r.Method,
			"path", r.URL.Path, "code", code, "duration", d)
	})
}
