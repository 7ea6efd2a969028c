package openai

import (
	"context"
	"encoding/hex"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the HTTP door's own metrics; the scheduler's (queue, KV,
// tokens) are the gRPC server's and count both doors.
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

// RequestIDHeader is the header of a request's id: taken from the client
// when it sends one (at most 128 printable ASCII bytes), made up
// otherwise, sent back as a response header and added as request_id to
// every log line of the request (the gRPC server's x-request-id rule).
const RequestIDHeader = "X-Request-Id"

type requestIDKey struct{}

func validRequestID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// requestIDHandler adds the request_id of the record's context, if any.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id, _ := ctx.Value(requestIDKey{}).(string); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

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
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			var b [8]byte
			for i := range b {
				b[i] = byte(mrand.Uint32())
			}
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set(RequestIDHeader, id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
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
		h.cfg.Logger.Log(r.Context(), lvl, "finished call", "protocol", "http", "method", r.Method,
			"path", r.URL.Path, "code", code, "duration", d)
	})
}
