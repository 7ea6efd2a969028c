// Package server is weft's gRPC front end: it implements
// inference.v1.InferenceService on top of a scheduler.Scheduler.
//
// Each request is validated and tokenized here (chat turns are rendered with
// the model's chat template first), then submitted to the scheduler, whose
// Stream is drained by exactly one goroutine per RPC that calls Send. The
// scheduler never waits for a client: a slow reader only grows its own
// mailbox, and a reader that accepts nothing for Config.SendStallTimeout is
// cut off with codes.ResourceExhausted (reason SLOW_READER) and its sequence
// cancelled.
//
// Errors from every layer go through one function, Status, which gives each
// a gRPC code and exactly one google.rpc.ErrorInfo (domain
// "weft.inference.v1").
//
// The gRPC server comes with go-grpc-middleware v2 interceptors (slog
// logging, panic recovery to codes.Internal, optional bearer-token auth),
// the otelgrpc stats handler, grpc health (NOT_SERVING until SetServing(true)
// and again from Shutdown on), reflection, keepalive enforcement, message
// size limits and optional TLS. Prometheus metrics (vLLM's meanings, weft_
// names) are served by MetricsHandler.
//
// ORCA load reports (orca.go) go into every RPC's trailers and out of band
// through OpenRcaService (at most every MinORCAInterval). They and the
// gauges read the scheduler's published Stats when asked, so the step loop
// pays nothing for them.
//
// Example:
//
//	srv, err := server.New(server.Config{Scheduler: sched, Tokenizer: tok, Chat: tmpl, Info: info})
//	if err != nil { ... }
//	go srv.Serve(lis)
//	srv.SetServing(true)
//	<-ctx.Done()
//	srv.Shutdown(drainCtx) // health NOT_SERVING, drain, GracefulStop, then Stop
package server
