package frontdoor

import (
	"context"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
)

// RequestIDHeader is the header (gRPC: metadata key, lower-cased) of a
// request's id: taken from the client when it sends a valid one
// (ValidRequestID), made up otherwise, sent back in the response headers
// and added as request_id to every log line of the request
// (Door.Logger).
const RequestIDHeader = "X-Request-Id"

// maxRequestIDBytes bounds a client's request id.
const maxRequestIDBytes = 128

type requestIDKey struct{}

// ValidRequestID reports whether a client's request id is usable: 1 to
// 128 printable ASCII bytes, no space.
func ValidRequestID(s string) bool {
	if s == "" || len(s) > maxRequestIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// WithRequestID gives ctx its request id: fromClient when valid, else a
// new random one (16 hex digits). It returns the id too.
func WithRequestID(ctx context.Context, fromClient string) (context.Context, string) {
	id := fromClient
	if !ValidRequestID(id) {
		var b [8]byte
		for i := range b {
			b[i] = byte(rand.Uint32())
		}
		id = hex.EncodeToString(b[:])
	}
	return context.WithValue(ctx, requestIDKey{}, id), id
}

// RequestID is ctx's request id ("" outside a request).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requestIDHandler adds the request_id of the record's context, if any.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
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
