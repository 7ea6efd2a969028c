package server

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
)

// drainRefusal is what a client learns from a refused call.
type drainRefusal struct {
	Code   codes.Code
	Reason string
	Retry  bool
}

func refusal(t *testing.T, err error) drainRefusal {
	t.Helper()
	code, reason := errorInfo(t, err)
	r := drainRefusal{Code: code, Reason: reason}
	for _, d := range status.Convert(err).Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			r.Retry = true
		}
	}
	return r
}

// After BeginDrain, health reads NOT_SERVING, every other call (unary,
// server stream, bidi stream) gets UNAVAILABLE / DRAINING with RetryInfo,
// and a stream already running goes on to its normal end.
func TestBeginDrainRefusesNewCalls(t *testing.T) {
	h := newHarness(t, harnessOpts{gated: true})
	ctx := context.Background()
	inflight, err := h.client.Generate(ctx, textPrompt("hello", 5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inflight.Header(); err != nil { // the handler is running
		t.Fatal(err)
	}
	h.srv.BeginDrain()

	r, err := healthpb.NewHealthClient(h.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: ServiceName})
	if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health while draining = %v, %v; want NOT_SERVING", r.GetStatus(), err)
	}
	want := drainRefusal{Code: codes.Unavailable, Reason: ReasonDraining, Retry: true}
	_, err = h.client.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{})
	if diff := cmp.Diff(want, refusal(t, err)); diff != "" {
		t.Errorf("GetModelInfo while draining (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, refusal(t, h.generate(ctx, textPrompt("hi", 3)).err)); diff != "" {
		t.Errorf("Generate while draining (-want +got):\n%s", diff)
	}
	cs, err := h.client.Chat(ctx)
	if err == nil {
		_, err = cs.Recv()
	}
	if diff := cmp.Diff(want, refusal(t, err)); diff != "" {
		t.Errorf("Chat while draining (-want +got):\n%s", diff)
	}

	h.openGate()
	got := collect(inflight)
	if got.err != nil || got.final == nil {
		t.Errorf("in-flight stream: final %v, err %v; want a normal end", got.final, got.err)
	}
}
