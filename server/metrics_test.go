package server

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
)

// gaugeValue reads a gauge from the server's registry.
func gaugeValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.cfg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// TestRejectedCounter: every refusal before admission counts under its
// reason (Generate, Tokenize, a refused chat turn, a missing token); the Go
// and process collectors are registered.
func TestRejectedCounter(t *testing.T) {
	h := newHarness(t, harnessOpts{door: func(c *frontdoor.Config) { c.MaxPromptBytes = 10 }})
	ctx := context.Background()
	bad := textPrompt("x", 1)
	bad.Sampling = &inferencev1.SamplingParams{TopP: 7}
	h.generate(ctx, bad)
	h.generate(ctx, textPrompt("", 1))
	h.generate(ctx, textPrompt(strings.Repeat("x", 11), 1))
	h.client.Tokenize(ctx, &inferencev1.TokenizeRequest{Text: strings.Repeat("x", 11)})
	s, err := h.client.Chat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Send(chatTurn(&inferencev1.ChatTurn{}))
	if m, err := s.Recv(); err != nil || m.GetError() == nil {
		t.Fatalf("chat: %v %v, want a TurnError", m, err)
	}
	s.CloseSend()
	s.Recv()

	mfs, err := h.srv.cfg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetName() != "weft_requests_rejected_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{ReasonInvalidParameter: 2, ReasonEmptyPrompt: 1, ReasonPromptTooLong: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("weft_requests_rejected_total (-want +got):\n%s", diff)
	}
	for _, n := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if !names[n] {
			t.Errorf("/metrics lacks %s", n)
		}
	}
}

// levelRecorder is a slog.Handler that records each record's level by the
// grpc.service attribute.
type levelRecorder struct {
	mu     sync.Mutex
	levels map[string][]slog.Level
	ids    map[string][]string // request_id attributes by grpc.service
}

func (r *levelRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *levelRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *levelRecorder) WithGroup(string) slog.Handler            { return r }
func (r *levelRecorder) Handle(_ context.Context, rec slog.Record) error {
	var svc, id string
	rec.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "grpc.service":
			svc = a.Value.String()
		case "request_id":
			id = a.Value.String()
		}
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.levels[svc] = append(r.levels[svc], rec.Level)
	if r.ids != nil {
		r.ids[svc] = append(r.ids[svc], id)
	}
	return nil
}

// TestProbesLogAtDebug: health calls log at debug, service calls at info.
func TestProbesLogAtDebug(t *testing.T) {
	rec := &levelRecorder{levels: map[string][]slog.Level{}}
	h := newHarness(t, harnessOpts{door: func(c *frontdoor.Config) { c.Logger = slog.New(rec) }})
	ctx := context.Background()
	if _, err := healthpb.NewHealthClient(h.conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{}); err != nil {
		t.Fatal(err)
	}
	h.srv.GRPC().Stop() // the finish-call logs are written before Stop returns
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := map[string][]slog.Level{"grpc.health.v1.Health": {slog.LevelDebug}, ServiceName: {slog.LevelInfo}}
	if diff := cmp.Diff(want, rec.levels); diff != "" {
		t.Errorf("log levels by service (-want +got):\n%s", diff)
	}
}

// TestRequestIDOnLogLines: every log line of a call carries its request_id,
// the client's x-request-id when it sends one, and the response header
// says which.
func TestRequestIDOnLogLines(t *testing.T) {
	rec := &levelRecorder{levels: map[string][]slog.Level{}, ids: map[string][]string{}}
	h := newHarness(t, harnessOpts{door: func(c *frontdoor.Config) { c.Logger = slog.New(rec) }})
	ctx := metadata.AppendToOutgoingContext(context.Background(), RequestIDHeader, "client-id-1")
	var hdr metadata.MD
	if _, err := h.client.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{}, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	s, err := h.client.Generate(context.Background(), textPrompt("x", 1))
	if err != nil {
		t.Fatal(err)
	}
	genHdr, err := s.Header()
	if err != nil {
		t.Fatal(err)
	}
	collect(s)
	h.srv.GRPC().Stop()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	gen := genHdr.Get(RequestIDHeader)
	if len(gen) != 1 || len(gen[0]) != 16 {
		t.Fatalf("Generate's %s header %q, want one made-up id", RequestIDHeader, gen)
	}
	want := map[string][]string{ServiceName: {"client-id-1", gen[0]}}
	if diff := cmp.Diff(want, rec.ids); diff != "" {
		t.Errorf("request_id by service (-want +got):\n%s", diff)
	}
	if got := hdr.Get(RequestIDHeader); len(got) != 1 || got[0] != "client-id-1" {
		t.Errorf("GetModelInfo's %s header %q", RequestIDHeader, got)
	}
}
