package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/scheduler"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every weft error.
const ErrorDomain = "weft.inference.v1"

// ErrorInfo reasons. Clients switch on these, never on messages.
const (
	ReasonInvalidParameter = "INVALID_PARAMETER" // a field is out of range; metadata "field"
	ReasonEmptyPrompt      = "EMPTY_PROMPT"      // no prompt text or ids
	ReasonInvalidUTF8      = "INVALID_UTF8"      // a string is not valid UTF-8; metadata "field"
	ReasonTokenOutOfRange  = "TOKEN_OUT_OF_RANGE"
	ReasonPromptTooLong    = "PROMPT_TOO_LONG" // metadata "prompt_tokens", "context_length"
	ReasonQueueFull        = "QUEUE_FULL"      // comes with RetryInfo
	ReasonDraining         = "DRAINING"        // the server is shutting down
	ReasonCancelled        = "CANCELLED"
	ReasonDeadlineExceeded = "DEADLINE_EXCEEDED"
	ReasonSlowReader       = "SLOW_READER" // the client stopped reading
	ReasonUnauthenticated  = "UNAUTHENTICATED"
	ReasonNoChatTemplate   = "NO_CHAT_TEMPLATE"
	ReasonChatTemplate     = "CHAT_TEMPLATE_ERROR" // the template rejected the conversation
	ReasonInternal         = "INTERNAL"
)

// queueFullRetry is the retry delay suggested with QUEUE_FULL.
const queueFullRetry = time.Second

// drainingRetry is the retry delay suggested with DRAINING: the client
// should retry, on another replica or on this one once it is back.
const drainingRetry = time.Second

// requestError is a request the server rejects before submitting it.
type requestError struct {
	code   codes.Code
	reason string
	msg    string
	meta   map[string]string
}

func (e *requestError) Error() string { return e.msg }

// badField reports an out-of-range field.
func badField(field string, format string, args ...any) error {
	return &requestError{
		code:   codes.InvalidArgument,
		reason: ReasonInvalidParameter,
		msg:    field + ": " + fmt.Sprintf(format, args...),
		meta:   map[string]string{"field": field},
	}
}

func reqErr(code codes.Code, reason, field, format string, args ...any) error {
	e := &requestError{code: code, reason: reason, msg: fmt.Sprintf(format, args...)}
	if field != "" {
		e.meta = map[string]string{"field": field}
		e.msg = field + ": " + e.msg
	}
	return e
}

// Sentinels of the server's own making.
var (
	errSlowReader      = errors.New("client accepted no data for too long; stream cut off and request cancelled")
	errUnauthenticated = errors.New("missing or invalid bearer token")
	errPanic           = errors.New("internal error")
	errServerDraining  = errors.New("the server is shutting down")
)

// Status turns any error of a request into a gRPC status error with exactly
// one google.rpc.ErrorInfo. It is the only place codes are chosen.
func Status(err error) error {
	if err == nil {
		return nil
	}
	st := toStatus(err)
	return st.Err()
}

func toStatus(err error) *status.Status {
	var (
		code   = codes.Internal
		reason = ReasonInternal
		meta   map[string]string
		retry  time.Duration
		msg    = err.Error()
	)
	var re *requestError
	switch {
	case errors.As(err, &re):
		code, reason, meta = re.code, re.reason, re.meta
	case errors.Is(err, scheduler.ErrPromptTooLong):
		code, reason = codes.InvalidArgument, ReasonPromptTooLong
	case errors.Is(err, scheduler.ErrInvalidRequest), errors.Is(err, sample.ErrInvalidParams):
		code, reason = codes.InvalidArgument, ReasonInvalidParameter
	case errors.Is(err, scheduler.ErrQueueFull):
		code, reason, retry = codes.ResourceExhausted, ReasonQueueFull, queueFullRetry
	case errors.Is(err, scheduler.ErrDraining), errors.Is(err, scheduler.ErrClosed), errors.Is(err, errServerDraining):
		code, reason, retry = codes.Unavailable, ReasonDraining, drainingRetry
	case errors.Is(err, errSlowReader):
		code, reason = codes.ResourceExhausted, ReasonSlowReader
	case errors.Is(err, errUnauthenticated):
		code, reason = codes.Unauthenticated, ReasonUnauthenticated
	case errors.Is(err, context.Canceled):
		code, reason = codes.Canceled, ReasonCancelled
	case errors.Is(err, context.DeadlineExceeded):
		code, reason = codes.DeadlineExceeded, ReasonDeadlineExceeded
	default:
		// A status from gRPC itself (a failed Send or Recv) keeps its code.
		if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown {
			if len(s.Details()) > 0 {
				return s
			}
			code, msg = s.Code(), s.Message()
			reason = codeReason(code)
		}
	}
	st := status.New(code, msg)
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: meta}}
	if retry > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(retry)})
	}
	withDetails, derr := st.WithDetails(details...)
	if derr != nil {
		return st
	}
	return withDetails
}

// codeReason names a reason for a bare gRPC code.
func codeReason(c codes.Code) string {
	switch c {
	case codes.Canceled:
		return ReasonCancelled
	case codes.DeadlineExceeded:
		return ReasonDeadlineExceeded
	case codes.Unauthenticated:
		return ReasonUnauthenticated
	}
	return c.String()
}

// promptTooLong builds the PROMPT_TOO_LONG error.
func promptTooLong(n, ctxLen int) error {
	return &requestError{
		code:   codes.InvalidArgument,
		reason: ReasonPromptTooLong,
		msg:    fmt.Sprintf("prompt has %d tokens; the context holds %d (prompt plus at least one generated token)", n, ctxLen),
		meta:   map[string]string{"prompt_tokens": strconv.Itoa(n), "context_length": strconv.Itoa(ctxLen)},
	}
}

// turnReasons are the refusals that fail one chat turn, not the stream.
var turnReasons = map[string]bool{
	ReasonInvalidParameter: true,
	ReasonEmptyPrompt:      true,
	ReasonInvalidUTF8:      true,
	ReasonTokenOutOfRange:  true,
	ReasonPromptTooLong:    true,
	ReasonChatTemplate:     true,
	ReasonQueueFull:        true,
}

// turnError is the TurnError for an error that refuses one chat turn (the
// same code, message and ErrorInfo a Generate would get as its status), or
// nil when err must end the stream.
func turnError(err error) *inferencev1.TurnError {
	st := toStatus(err)
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && turnReasons[ei.GetReason()] {
			return &inferencev1.TurnError{
				Code:     int32(st.Code()),
				Message:  st.Message(),
				Reason:   ei.GetReason(),
				Domain:   ei.GetDomain(),
				Metadata: ei.GetMetadata(),
			}
		}
	}
	return nil
}
