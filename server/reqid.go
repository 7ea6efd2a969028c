package server

import (
	"context"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/weft-inference/weft/internal/frontdoor"
)

// RequestIDHeader is the metadata key of a call's request id
// (frontdoor.RequestIDHeader; gRPC metadata keys are case-insensitive): the
// client's when valid, made up otherwise, sent back as a response header
// and added as request_id to every log line of the call.
const RequestIDHeader = frontdoor.RequestIDHeader

// withRequestID gives ctx the client's request id or a new one.
func withRequestID(ctx context.Context) (context.Context, string) {
	client := ""
	if v := metadata.ValueFromIncomingContext(ctx, RequestIDHeader); len(v) > 0 {
		client = v[0]
	}
	return frontdoor.WithRequestID(ctx, client)
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
