package server

import (
	"context"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// RequestIDHeader is the metadata key of a call's request id: taken from the
// client when it sends one (at most 128 printable ASCII bytes), made up
// otherwise, sent back as a response header and added as request_id to
// every log line of the call.
const RequestIDHeader = "x-request-id"

type requestIDKey struct{}

// requestID is the call's request id ("" outside a call).
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// withRequestID gives ctx the client's request id or a new one.
func withRequestID(ctx context.Context) (context.Context, string) {
	id := ""
	if v := metadata.ValueFromIncomingContext(ctx, RequestIDHeader); len(v) > 0 && validRequestID(v[0]) {
		id = v[0]
	} else {
		var b [8]byte
		for i := range b {
			b[i] = byte(rand.Uint32())
		}
		id = hex.EncodeToString(b[:])
	}
	return context.WithValue(ctx, requestIDKey{}, id), id
}

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

// requestIDUnary and requestIDStream come first in the interceptor chains,
// so the logging interceptor's lines carry the id.
func requestIDUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, id := withRequestID(ctx)
	grpc.SetHeader(ctx, metadata.Pairs(RequestIDHeader, id))
	return handler(ctx, req)
}

func requestIDStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, id := withRequestID(ss.Context())
	ss.SetHeader(metadata.Pairs(RequestIDHeader, id))
	w := middleware.WrapServerStream(ss)
	w.WrappedContext = ctx
	return handler(srv, w)
}

// requestIDHandler adds the request_id of the record's context, if any.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := requestID(ctx); id != "" {
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
