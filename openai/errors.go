package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/scheduler"
)

// requestError is a request refused before it is submitted.
type requestError struct {
	status int
	code   string // OpenAI's error code ("" : null)
	param  string // the offending parameter ("" : null)
	msg    string
}

func (e *requestError) Error() string { return e.msg }

// badParam reports an invalid or out-of-range parameter (400).
func badParam(param, format string, args ...any) error {
	return &requestError{status: http.StatusBadRequest, code: "invalid_value", param: param,
		msg: param + ": " + fmt.Sprintf(format, args...)}
}

// Sentinels of the handlers' own making.
var (
	errUnauthenticated = errors.New("missing or invalid bearer token")
	errNotServing      = errors.New("the server is not serving (loading or shutting down)")
	errNoChatTemplate  = errors.New("the model has no chat template")
)

// errorBody is OpenAI's error shape.
type errorBody struct {
	Error apiError `json:"error"`
}

type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`

	status     int
	retryAfter time.Duration
}

// queueFullRetry is the Retry-After suggested with 429 and 503.
const queueFullRetry = time.Second

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// apiErrorOf turns any error of a request into OpenAI's error and an HTTP
// status. It is the only place statuses are chosen.
func apiErrorOf(err error) apiError {
	e := apiError{Message: err.Error(), Type: "server_error", status: http.StatusInternalServerError}
	var re *requestError
	var mbe *http.MaxBytesError
	var le *scheduler.LimitError
	var pe *sample.ParamError
	var be *frontdoor.BytesError
	var te *frontdoor.TemplateError
	var me *frontdoor.MarkupError
	var xe *scheduler.TextError
	var fe *frontdoor.FieldError
	var ie *frontdoor.InputError
	var de *frontdoor.DimensionsError
	var ue *frontdoor.UTF8Error
	invalid := func(param, code string) {
		e.status, e.Type, e.Param, e.Code = http.StatusBadRequest, "invalid_request_error", nullable(param), nullable(code)
	}
	switch {
	case errors.As(err, &re):
		e.status, e.Type, e.Param, e.Code = re.status, "invalid_request_error", nullable(re.param), nullable(re.code)
	case errors.As(err, &ie):
		// One input of /v1/embeddings: its own error, named by index.
		param := fmt.Sprintf("input[%d]", ie.Index)
		e = apiErrorOf(ie.Err)
		e.Param = nullable(param)
		e.Message = param + ": " + detailOf(ie.Err)
	case errors.As(err, &de):
		invalid("dimensions", "invalid_value")
	case errors.Is(err, frontdoor.ErrEmptyInput):
		invalid("input", "invalid_value")
	case errors.Is(err, scheduler.ErrNoEmbeddings):
		invalid("model", "model_not_supported")
	case errors.As(err, &le):
		// The scheduler's field names are the API's parameter names.
		code := "invalid_value"
		if errors.Is(err, scheduler.ErrPromptTooLong) {
			code = "context_length_exceeded"
		}
		invalid(le.Field, code)
		e.Message = le.Field + ": " + le.Detail()
	case errors.As(err, &xe):
		invalid(xe.Field, "invalid_value")
		e.Message = fmt.Sprintf("%s: string %d is not valid UTF-8", xe.Field, xe.Index)
	case errors.As(err, &pe):
		invalid(pe.Field, "invalid_value")
		e.Message = pe.Field + ": " + pe.Msg
	case errors.As(err, &be):
		invalid(be.Field, "context_length_exceeded")
	case errors.As(err, &me):
		invalid(me.Field, "invalid_value")
	case errors.As(err, &fe):
		invalid(fe.Field, "invalid_value")
	case errors.As(err, &te):
		invalid("messages", "invalid_value")
	case errors.As(err, &ue):
		invalid(ue.Field, "invalid_value")
	case errors.As(err, &mbe):
		e.status, e.Type, e.Code = http.StatusRequestEntityTooLarge, "invalid_request_error", nullable("request_too_large")
		e.Message = "request body over " + strconv.FormatInt(mbe.Limit, 10) + " bytes"
	case errors.Is(err, scheduler.ErrPromptTooLong):
		e.status, e.Type, e.Code = http.StatusBadRequest, "invalid_request_error", nullable("context_length_exceeded")
	case errors.Is(err, scheduler.ErrInvalidRequest), errors.Is(err, sample.ErrInvalidParams):
		e.status, e.Type, e.Code = http.StatusBadRequest, "invalid_request_error", nullable("invalid_value")
	case errors.Is(err, errNoChatTemplate), errors.Is(err, frontdoor.ErrNoChat):
		e.status, e.Type = http.StatusBadRequest, "invalid_request_error"
	case errors.Is(err, errUnauthenticated):
		e.status, e.Type, e.Code = http.StatusUnauthorized, "invalid_request_error", nullable("invalid_api_key")
	case errors.Is(err, scheduler.ErrQueueFull):
		e.status, e.Type, e.Code, e.retryAfter = http.StatusTooManyRequests, "rate_limit_error", nullable("rate_limit_exceeded"), queueFullRetry
	case errors.Is(err, scheduler.ErrDraining), errors.Is(err, scheduler.ErrClosed), errors.Is(err, errNotServing):
		e.status, e.Type, e.Code, e.retryAfter = http.StatusServiceUnavailable, "server_error", nullable("service_unavailable"), queueFullRetry
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client went away; nobody reads this, but say what happened.
		e.status, e.Type, e.Code = 499, "invalid_request_error", nullable("cancelled")
	}
	return e
}

// detailOf is err's message without the owner's field name in front, for
// a door that names the field itself.
func detailOf(err error) string {
	var le *scheduler.LimitError
	var be *frontdoor.BytesError
	switch {
	case errors.As(err, &le):
		return le.Detail()
	case errors.As(err, &be):
		return be.Detail()
	}
	return err.Error()
}

// writeError writes err as OpenAI's JSON error with its status.
func writeError(w http.ResponseWriter, err error) {
	e := apiErrorOf(err)
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(e.retryAfter/time.Second)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(errorBody{Error: e})
}
