package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/scheduler"
)

// requestError is a request refused before it is submitted.
type requestError struct {
	status int
	typ    string // Anthropic's error type
	msg    string
}

func (e *requestError) Error() string { return e.msg }

// badParam reports an invalid parameter (400 invalid_request_error).
func badParam(param, format string, args ...any) error {
	return &requestError{status: http.StatusBadRequest, typ: "invalid_request_error",
		msg: param + ": " + fmt.Sprintf(format, args...)}
}

// Sentinels of the handlers' own making.
var (
	errUnauthenticated = errors.New("missing or invalid API key (x-api-key or Authorization: Bearer)")
	errNotServing      = errors.New("the server is not serving (loading or shutting down)")
	errNoChatTemplate  = errors.New("the model has no chat template")
)

// errorBody is Anthropic's error shape.
type errorBody struct {
	Type  string   `json:"type"` // "error"
	Error apiError `json:"error"`
}

type apiError struct {
	Type    string `json:"type"`
	Message string `json:"message"`

	status     int
	retryAfter time.Duration
}

// retryAfter is the Retry-After suggested with 429, 503 and 529.
const retryAfter = time.Second

// statusOverloaded is Anthropic's "overloaded_error" status.
const statusOverloaded = 529

// apiErrorOf turns any error of a request into Anthropic's error type and
// an HTTP status. It is the only place statuses are chosen. Field names
// are the scheduler's and the Door's neutral ones renamed to this wire's.
func apiErrorOf(err error) apiError {
	e := apiError{Message: err.Error(), Type: "api_error", status: http.StatusInternalServerError}
	var re *requestError
	var mbe *http.MaxBytesError
	var le *scheduler.LimitError
	var pe *sample.ParamError
	var be *frontdoor.BytesError
	var xe *scheduler.TextError
	var fe *frontdoor.FieldError
	var me *frontdoor.MarkupError
	invalid := func(msg string) {
		e.status, e.Type, e.Message = http.StatusBadRequest, "invalid_request_error", msg
	}
	switch {
	case errors.As(err, &re):
		e.status, e.Type = re.status, re.typ
	case errors.As(err, &le):
		invalid(wireField(le.Field) + ": " + le.Detail())
	case errors.As(err, &xe):
		invalid(fmt.Sprintf("%s: string %d is not valid UTF-8", wireField(xe.Field), xe.Index))
	case errors.As(err, &pe):
		invalid(wireField(pe.Field) + ": " + pe.Msg)
	case errors.As(err, &be):
		invalid(wireField(be.Field) + ": " + be.Detail())
	case errors.As(err, &fe):
		invalid(toolField(fe.Field) + ": " + fe.Msg)
	case errors.As(err, &me):
		// Its field counts the messages the template renders (the system
		// prompt and each tool_result are messages of their own there).
		invalid(markupField(me.Field) + ": " + me.Detail())
	case errors.As(err, new(*frontdoor.TemplateError)):
		invalid("messages: " + err.Error())
	case errors.As(err, &mbe):
		e.status, e.Type = http.StatusRequestEntityTooLarge, "request_too_large"
		e.Message = "request body over " + strconv.FormatInt(mbe.Limit, 10) + " bytes"
	case errors.Is(err, scheduler.ErrPromptTooLong), errors.Is(err, scheduler.ErrInvalidRequest),
		errors.Is(err, sample.ErrInvalidParams), errors.Is(err, errNoChatTemplate), errors.Is(err, frontdoor.ErrNoChat):
		invalid(err.Error())
	case errors.Is(err, errUnauthenticated):
		e.status, e.Type = http.StatusUnauthorized, "authentication_error"
	case errors.Is(err, scheduler.ErrQueueFull):
		e.status, e.Type, e.retryAfter = http.StatusTooManyRequests, "rate_limit_error", retryAfter
	case errors.Is(err, scheduler.ErrDraining), errors.Is(err, scheduler.ErrClosed), errors.Is(err, errNotServing):
		e.status, e.Type, e.retryAfter = statusOverloaded, "overloaded_error", retryAfter
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client went away; nobody reads this, but say what happened.
		e.status, e.Type = 499, "invalid_request_error"
	}
	return e
}

// markupField names a frontdoor.MarkupError's field on this wire: a tool
// definition's index is the request's; a message's is the rendered
// conversation's, so it is named as the messages as a whole.
func markupField(f string) string {
	if strings.HasPrefix(f, "tools[") {
		return f
	}
	return "messages (a tool_use's id, name or input, or a tool_result's tool_use_id)"
}

// wireField renames the owners' neutral field names to this wire's.
func wireField(f string) string {
	switch f {
	case "stop_strings", "stop":
		return "stop_sequences"
	case "prompt":
		return "messages"
	}
	return f
}

// writeError writes err as Anthropic's JSON error with its status.
func writeError(w http.ResponseWriter, err error) {
	e := apiErrorOf(err)
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(e.retryAfter/time.Second)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(errorBody{Type: "error", Error: e})
}
