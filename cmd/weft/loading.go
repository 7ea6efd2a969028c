package main

import (
	"crypto/tls"
	"net"
	"sync"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/weft-inference/weft/server"
)

// While the model loads (seconds to minutes for a large GGUF), the gRPC port
// already answers: health says NOT_SERVING and every other call gets
// Unavailable, so orchestrators see "starting", not "connection refused".
// When the model is ready the same listening socket is handed to the real
// server without closing it.

// sharedListener accepts on one socket for two servers in turn: the
// loading-phase server, then the real one.
type sharedListener struct {
	l     net.Listener
	conns chan net.Conn
	done  chan struct{} // closed when l.Accept fails for good
	err   error         // set before done is closed
}

func shareListener(l net.Listener) *sharedListener {
	s := &sharedListener{l: l, conns: make(chan net.Conn), done: make(chan struct{})}
	go func() { // ends when l is closed (by the last view's Close)
		for {
			c, err := l.Accept()
			if err != nil {
				s.err = err
				close(s.done)
				return
			}
			select {
			case s.conns <- c:
			case <-s.done: // unreachable: done is only closed here
			}
		}
	}()
	return s
}

// view returns a listener over s. Closing a view stops its Accept; only the
// final view (closeSocket) closes the socket itself.
func (s *sharedListener) view(closeSocket bool) net.Listener {
	return &listenerView{s: s, closed: make(chan struct{}), closeSocket: closeSocket}
}

type listenerView struct {
	s           *sharedListener
	closed      chan struct{}
	once        sync.Once
	closeSocket bool
}

func (v *listenerView) Accept() (net.Conn, error) {
	select {
	case <-v.closed:
		return nil, net.ErrClosed
	default:
	}
	select {
	case c := <-v.s.conns:
		return c, nil
	case <-v.closed:
		return nil, net.ErrClosed
	case <-v.s.done:
		return nil, v.s.err
	}
}

func (v *listenerView) Close() error {
	v.once.Do(func() {
		close(v.closed)
		if v.closeSocket {
			v.s.l.Close()
		}
	})
	return nil
}

func (v *listenerView) Addr() net.Addr { return v.s.l.Addr() }

// startLoadingServer serves health (NOT_SERVING) on lis until the returned
// stop is called; other RPCs get Unavailable with the reason LOADING. With
// tlsCfg it speaks only TLS, with token it requires the same bearer token
// as the real server (health exempt), so neither differs while loading.
func startLoadingServer(lis net.Listener, tlsCfg *tls.Config, token string) (stop func()) {
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus(server.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	loading := status.New(codes.Unavailable, "the model is still loading")
	if st, err := loading.WithDetails(&errdetails.ErrorInfo{Reason: "LOADING", Domain: server.ErrorDomain}); err == nil {
		loading = st
	}
	opts := []grpc.ServerOption{grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
		return loading.Err()
	})}
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	if token != "" {
		au, as := server.AuthInterceptors(token, nil)
		opts = append(opts, grpc.UnaryInterceptor(au), grpc.StreamInterceptor(as))
	}
	gs := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(gs, hs)
	done := make(chan struct{})
	go func() { defer close(done); gs.Serve(lis) }()
	return func() {
		gs.Stop()
		<-done
	}
}
