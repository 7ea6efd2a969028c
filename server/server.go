package server

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
)

// ServiceName is the full name of the inference service (also the health
// service name that reports it).
const ServiceName = "inference.v1.InferenceService"

// Server serves InferenceService over gRPC.
type Server struct {
	inferencev1.UnimplementedInferenceServiceServer

	cfg     Config
	grpc    *grpc.Server
	health  *health.Server
	metrics *metrics
	door    *frontdoor.Door // the request pipeline, shared with every door
	log     *slog.Logger    // the Door's: lines carry the request id
	load    *loadReporter   // ORCA reports; also each Chat turn's LoadReport
	// draining is set by BeginDrain: every RPC but health is refused
	// with UNAVAILABLE / DRAINING.
	draining atomic.Bool
}

var _ inferencev1.InferenceServiceServer = (*Server)(nil)

// New builds the gRPC server with its interceptors, health (NOT_SERVING
// until SetServing(true)) and reflection services, and the metrics.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	lim := cfg.Scheduler.Limits()
	s := &Server{cfg: cfg, health: health.NewServer(), door: cfg.Door, log: cfg.Door.Logger()}
	m, err := newMetrics(cfg.Registry, cfg.Scheduler.Stats, cfg.Info.KV)
	if err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	s.metrics = m

	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall)}
	lg := interceptorLogger(s.log)
	rec := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		s.log.ErrorContext(ctx, "panic in handler", "panic", p)
		return Status(errPanic)
	})
	unary := []grpc.UnaryServerInterceptor{requestIDUnary, logging.UnaryServerInterceptor(lg, logOpts...)}
	streams := []grpc.StreamServerInterceptor{requestIDStream, logging.StreamServerInterceptor(lg, logOpts...)}
	if cfg.AuthToken != "" {
		au, as := AuthInterceptors(cfg.AuthToken, s.refuse)
		unary = append(unary, au)
		streams = append(streams, as)
	}
	unary = append(unary, s.refuseWhileDraining)
	streams = append(streams, s.refuseStreamWhileDraining)
	unary = append(unary, recovery.UnaryServerInterceptor(rec))
	streams = append(streams, recovery.StreamServerInterceptor(rec))

	load := newLoadReporter(cfg.Scheduler.Stats, lim.MaxSeqs)
	s.load = load
	opts := append(orcaServerOptions(load), // first: outermost, so every RPC's trailer gets a report
		grpc.StatsHandler(otelgrpc.NewServerHandler()),
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: 20 * time.Second}),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(streams...),
	)
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	s.grpc = grpc.NewServer(opts...)
	inferencev1.RegisterInferenceServiceServer(s.grpc, s)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	registerORCA(s.grpc, load)
	if err := registerReflection(s.grpc); err != nil {
		return nil, err
	}
	s.SetServing(false)
	return s, nil
}

// AuthInterceptors return interceptors that require "authorization: Bearer
// token" on every call but the health service's (compared in constant
// time); a missing or wrong token gets UNAUTHENTICATED, turned into a status
// by refuse (Status when nil; the Server passes the one that also counts the
// refusal). The loading-phase server in cmd/weft uses them too, so auth
// holds from the first byte.
func AuthInterceptors(token string, refuse func(error) error) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	want := []byte(token)
	if refuse == nil {
		refuse = Status
	}
	af := func(ctx context.Context) (context.Context, error) {
		tok, err := auth.AuthFromMD(ctx, "bearer")
		if err != nil || subtle.ConstantTimeCompare([]byte(tok), want) != 1 {
			return nil, refuse(errUnauthenticated)
		}
		return ctx, nil
	}
	notHealth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return c.Service != healthpb.Health_ServiceDesc.ServiceName
	})
	return selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(af), notHealth),
		selector.StreamServerInterceptor(auth.StreamServerInterceptor(af), notHealth)
}

// isHealth reports whether fullMethod belongs to the health service.
func isHealth(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/"+healthpb.Health_ServiceDesc.ServiceName+"/")
}

// refuseWhileDraining refuses every unary call but health's once
// BeginDrain was called. (Refusal point: reason DRAINING.)
func (s *Server) refuseWhileDraining(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if s.draining.Load() && !isHealth(info.FullMethod) {
		return nil, s.refuse(errServerDraining)
	}
	return h(ctx, req)
}

// refuseStreamWhileDraining is refuseWhileDraining for streams (Generate,
// Chat, health's Watch is let through). (Refusal point: reason DRAINING.)
func (s *Server) refuseStreamWhileDraining(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if s.draining.Load() && !isHealth(info.FullMethod) {
		return s.refuse(errServerDraining)
	}
	return h(srv, ss)
}

// interceptorLogger adapts slog to the middleware's logger. Health and
// reflection calls (probes, grpcurl) log at debug level only.
func interceptorLogger(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		if probeCall(fields) {
			lvl = logging.LevelDebug
		}
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}

// probeCall reports whether the middleware's fields name a health or
// reflection service.
func probeCall(fields []any) bool {
	for i := 0; i+1 < len(fields); i += 2 {
		if k, _ := fields[i].(string); k == logging.ServiceFieldKey {
			svc, _ := fields[i+1].(string)
			return strings.HasPrefix(svc, "grpc.health.") || strings.HasPrefix(svc, "grpc.reflection.")
		}
	}
	return false
}

// GRPC returns the underlying gRPC server (to register more services).
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Serve accepts connections on lis until Shutdown.
func (s *Server) Serve(lis net.Listener) error { return s.grpc.Serve(lis) }

// SetServing sets the health of the server ("") and of ServiceName.
func (s *Server) SetServing(ok bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ok {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(ServiceName, st)
}

// BeginDrain starts a drain: health turns NOT_SERVING (and stays readable),
// the scheduler stops admitting, and every new RPC but health's gets
// UNAVAILABLE / DRAINING with RetryInfo. The listener stays open and
// in-flight streams go on; Shutdown ends them.
func (s *Server) BeginDrain() {
	s.draining.Store(true)
	s.SetServing(false)
	s.cfg.Scheduler.Drain()
}

// Shutdown stops the server gracefully: BeginDrain, then no new connections
// are accepted and in-flight streams may finish until ctx ends; then the
// remaining ones are cancelled (Stop). It returns once every handler has
// returned.
func (s *Server) Shutdown(ctx context.Context) {
	s.BeginDrain()
	s.health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.log.Warn("drain deadline passed; cancelling the remaining streams")
		s.grpc.Stop()
		<-done
	}
}

// Stop closes the listener and every connection at once (a second signal);
// it returns once every handler has returned.
func (s *Server) Stop() {
	s.BeginDrain()
	s.health.Shutdown()
	s.grpc.Stop()
}
