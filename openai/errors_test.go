package openai

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/scheduler"
)

// TestErrorMapping: each typed error gets its status, OpenAI type and code
// (and Retry-After when retrying makes sense) from writeError.
func TestErrorMapping(t *testing.T) {
	type out struct {
		Status     int
		Type, Code string
		RetryAfter string
	}
	for _, tc := range []struct {
		err  error
		want out
	}{
		{badParam("top_p", "bad"), out{400, "invalid_request_error", "invalid_value", ""}},
		{fmt.Errorf("submit: %w", scheduler.ErrInvalidRequest), out{400, "invalid_request_error", "invalid_value", ""}},
		{fmt.Errorf("x: %w", sample.ErrInvalidParams), out{400, "invalid_request_error", "invalid_value", ""}},
		{scheduler.ErrPromptTooLong, out{400, "invalid_request_error", "context_length_exceeded", ""}},
		{errUnauthenticated, out{401, "invalid_request_error", "invalid_api_key", ""}},
		{&http.MaxBytesError{Limit: 10}, out{413, "invalid_request_error", "request_too_large", ""}},
		{fmt.Errorf("submit: %w", scheduler.ErrQueueFull), out{429, "rate_limit_error", "rate_limit_exceeded", "1"}},
		{frontdoor.ErrQueueTimeout, out{429, "rate_limit_error", "rate_limit_exceeded", "1"}},
		{&scheduler.TextError{Field: "stop", Index: 1}, out{400, "invalid_request_error", "invalid_value", ""}},
		{scheduler.ErrDraining, out{503, "server_error", "service_unavailable", "1"}},
		{scheduler.ErrClosed, out{503, "server_error", "service_unavailable", "1"}},
		{errNotServing, out{503, "server_error", "service_unavailable", "1"}},
		{context.Canceled, out{499, "invalid_request_error", "cancelled", ""}},
		{fmt.Errorf("backend exploded"), out{500, "server_error", "", ""}},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			w := httptest.NewRecorder()
			writeError(w, tc.err)
			e := apiErrorOf(tc.err)
			code := ""
			if e.Code != nil {
				code = *e.Code
			}
			got := out{w.Code, e.Type, code, w.Header().Get("Retry-After")}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
