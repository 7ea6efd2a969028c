package server

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/scheduler"
)

// serveOverBufconn runs sched's step loop and a Server of cfg (its
// Scheduler set to sched, its Door made of dcfg with sched's limits) on an
// in-memory listener, and returns a client of it. At cleanup the client
// closes, the server stops and then the step loop ends, so cleanups the caller registered before (closing the backend
// and the model) run after the last step.
func serveOverBufconn(tb testing.TB, sched *scheduler.Scheduler, dcfg frontdoor.Config, cfg Config) inferencev1.InferenceServiceClient {
	tb.Helper()
	dcfg.Limits = sched.Limits()
	if dcfg.Logger == nil {
		dcfg.Logger = slog.New(slog.DiscardHandler)
	}
	door, err := frontdoor.New(dcfg)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Door = door
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { // ends when cancel is called at cleanup
		defer close(runDone)
		sched.Run(ctx)
	}()
	tb.Cleanup(func() { cancel(); <-runDone }) // after the server stops (cleanups run last first)
	cfg.Scheduler = sched
	srv, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	serveDone := make(chan struct{})
	go func() { // ends when the gRPC server stops at cleanup
		defer close(serveDone)
		srv.Serve(lis)
	}()
	srv.SetServing(true)
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close(); srv.GRPC().Stop(); <-serveDone })
	return inferencev1.NewInferenceServiceClient(conn)
}
