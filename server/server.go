package server

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
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
	"google.golang.org/grpc/reflection"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
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
}

var _ inferencev1.InferenceServiceServer = (*Server)(nil)

// New builds the gRPC server with its interceptors, health (NOT_SERVING
// until SetServing(true)) and reflection services, and the metrics.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, health: health.NewServer()}
	m, err := newMetrics(cfg.Registry, cfg.Scheduler.Stats, cfg.Info.KV)
	if err != nil {
		return nil, fmt.Errorf("server: metrics: %w", err)
	}
	s.metrics = m

	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall)}
	lg := interceptorLogger(cfg.Logger)
	rec := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		cfg.Logger.ErrorContext(ctx, "panic in handler", "panic", p)
		return Status(errPanic)
	})
	unary := []grpc.UnaryServerInterceptor{logging.UnaryServerInterceptor(lg, logOpts...)}
	streams := []grpc.StreamServerInterceptor{logging.StreamServerInterceptor(lg, logOpts...)}
	if cfg.AuthToken != "" {
		notHealth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
			return c.Service != healthpb.Health_ServiceDesc.ServiceName
		})
		af := s.authenticate
		unary = append(unary, selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(af), notHealth))
		streams = append(streams, selector.StreamServerInterceptor(auth.StreamServerInterceptor(af), notHealth))
	}
	unary = append(unary, recovery.UnaryServerInterceptor(rec))
	streams = append(streams, recovery.StreamServerInterceptor(rec))

	load := newLoadReporter(cfg.Scheduler.Stats, cfg.MaxSeqs)
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
	reflection.Register(s.grpc)
	s.SetServing(false)
	return s, nil
}

// authenticate checks the bearer token.
func (s *Server) authenticate(ctx context.Context) (context.Context, error) {
	tok, err := auth.AuthFromMD(ctx, "bearer")
	if err != nil || subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AuthToken)) != 1 {
		return nil, Status(errUnauthenticated)
	}
	return ctx, nil
}

// interceptorLogger adapts slog to the middleware's logger.
func interceptorLogger(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
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

// Shutdown stops the server gracefully: health turns NOT_SERVING, the
// scheduler stops admitting, no new streams are accepted and in-flight ones
// may finish until ctx ends; then the remaining ones are cancelled (Stop).
func (s *Server) Shutdown(ctx context.Context) {
	s.SetServing(false)
	s.health.Shutdown()
	s.cfg.Scheduler.Drain()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.cfg.Logger.Warn("drain deadline passed; cancelling the remaining streams")
		s.grpc.Stop()
		<-done
	}
}
