package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/server"
)

// While the model loads, the port answers: health NOT_SERVING, other calls
// Unavailable with reason LOADING; then the same socket serves the model.
func TestHealthNotServingWhileLoading(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseServeFlags([]string{"--backend", "cpu", "--kv-memory", "4MiB"})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	load := func(serveConfig, *slog.Logger) (*runtime.Model, error) {
		<-release
		return runtime.LoadDefault()
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- loadAndServe(ctx, c, serveDeps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, lis, nil, load, ready)
	}()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	tryCheck := func() (healthpb.HealthCheckResponse_ServingStatus, error) {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		r, err := hc.Check(cctx, &healthpb.HealthCheckRequest{Service: server.ServiceName}, grpc.WaitForReady(true))
		return r.GetStatus(), err
	}
	check := func() healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		st, err := tryCheck()
		if err != nil {
			t.Fatalf("health check: %v", err)
		}
		return st
	}
	if got := check(); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("while loading: health %v, want NOT_SERVING", got)
	}
	ic := inferencev1.NewInferenceServiceClient(conn)
	_, err = ic.GetModelInfo(context.Background(), &inferencev1.GetModelInfoRequest{})
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		t.Fatalf("GetModelInfo while loading: %v, want Unavailable", err)
	}
	var reason string
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			reason = ei.Reason
		}
	}
	if reason != "LOADING" {
		t.Errorf("ErrorInfo reason %q, want LOADING", reason)
	}

	close(release)
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("loadAndServe returned early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("model never became ready")
	}
	// The client reconnects to the same address: now the real server. A
	// check caught in the hand-over (the loading server closing its
	// connections) fails with Unavailable, as a client sees it; the next
	// one reaches the real server.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := tryCheck()
		if err == nil && st == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if err != nil && status.Code(err) != codes.Unavailable {
			t.Fatalf("health check after loading: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("health never turned SERVING after loading (last: %v, %v)", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	info, err := ic.GetModelInfo(context.Background(), &inferencev1.GetModelInfoRequest{}, grpc.WaitForReady(true))
	if err != nil || info.GetName() != runtime.DefaultModelName {
		t.Fatalf("GetModelInfo after loading: %v, %v", info.GetName(), err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("loadAndServe: %v", err)
	}
}
