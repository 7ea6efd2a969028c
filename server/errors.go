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
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/scheduler"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every weft error.
const ErrorDomain = "weft.inference.v1"

// ErrorInfo reasons. Clients switch on these, never on messages.
const (
	ReasonInvalidParameter = "INVALID_PARAMETER" // a field is out of range; metadata "field" (and "limit", "value" for a bound)
	ReasonEmptyPrompt      = "EMPTY_PROMPT"      // no prompt text or ids
	ReasonInvalidUTF8      = "INVALID_UTF8"      // a string is not valid UTF-8; metadata "field"
	ReasonTokenOutOfRange  = "TOKEN_OUT_OF_RANGE"
	ReasonPromptTooLong    = "PROMPT_TOO_LONG" // metadata "field", "context_length", and "op", "limit", "value" (tokens) or "prompt_bytes", "max_prompt_bytes"
	ReasonQueueFull        = "QUEUE_FULL"      // comes with RetryInfo
	ReasonDraining         = "DRAINING"        // the server is shutting down
	ReasonCancelled        = "CANCELLED"
	ReasonDeadlineExceeded = "DEADLINE_EXCEEDED"
	ReasonSlowReader       = "SLOW_READER" // the client stopped reading
	ReasonUnauthenticated  = "UNAUTHENTICATED"
	ReasonNoChatTemplate   = "NO_CHAT_TEMPLATE"
	ReasonChatTemplate     = "CHAT_TEMPLATE_ERROR" // the template rejected the conversation
	ReasonNoEmbeddings     = "NO_EMBEDDINGS"       // the server computes no embeddings (its backend or batching mode)
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
	var (
		re *requestError
		le *scheduler.LimitError
		pe *sample.ParamError
		be *frontdoor.BytesError
		te *frontdoor.TemplateError
		me *frontdoor.MarkupError
		xe *scheduler.TextError
		fe *frontdoor.FieldError
		ie *frontdoor.InputError
		de *frontdoor.DimensionsError
		ue *frontdoor.UTF8Error
	)
	switch {
	case errors.As(err, &re):
		code, reason, meta = re.code, re.reason, re.meta
	case errors.As(err, &ie):
		code, reason, meta, msg = inputStatus(ie)
	case errors.As(err, &de):
		code, reason = codes.InvalidArgument, ReasonInvalidParameter
		meta = map[string]string{"field": "dimensions", "value": strconv.Itoa(de.Got), "embedding_dimensions": strconv.Itoa(de.Want)}
	case errors.Is(err, scheduler.ErrNoEmbeddings):
		code, reason = codes.FailedPrecondition, ReasonNoEmbeddings
	case errors.As(err, &le):
		code, reason, meta = codes.InvalidArgument, limitReason(le), limitMeta(le)
		msg = wireField(le.Field) + ": " + le.Detail()
		if errors.Is(le, scheduler.ErrPromptTooLong) {
			msg += fmt.Sprintf(" (the context holds %d: the prompt plus at least one generated token)", le.Limit+1)
		}
	case errors.As(err, &xe):
		code, reason = codes.InvalidArgument, ReasonInvalidUTF8
		meta = map[string]string{"field": wireField(xe.Field)}
		msg = fmt.Sprintf("%s: string %d is not valid UTF-8", wireField(xe.Field), xe.Index)
	case errors.As(err, &ue):
		code, reason = codes.InvalidArgument, ReasonInvalidUTF8
		meta = map[string]string{"field": wireField(ue.Field)}
	case errors.As(err, &pe):
		code, reason = codes.InvalidArgument, ReasonInvalidParameter
		meta = map[string]string{"field": wireField(pe.Field)}
		msg = wireField(pe.Field) + ": " + pe.Msg
	case errors.As(err, &be):
		code, reason = codes.InvalidArgument, ReasonPromptTooLong
		msg = wireField(be.Field) + ": " + be.Detail()
		meta = map[string]string{
			"field":            wireField(be.Field),
			"prompt_bytes":     strconv.Itoa(be.Bytes),
			"max_prompt_bytes": strconv.Itoa(be.MaxBytes),
			"context_length":   strconv.Itoa(be.ContextLen),
		}
	case errors.As(err, &me):
		code, reason = codes.InvalidArgument, ReasonInvalidParameter
		meta = map[string]string{"field": wireField(me.Field)}
		msg = wireField(me.Field) + ": " + me.Detail()
	case errors.As(err, &fe):
		code, reason = codes.InvalidArgument, ReasonInvalidParameter
		meta = map[string]string{"field": fe.Field}
	case errors.As(err, &te):
		code, reason = codes.InvalidArgument, ReasonChatTemplate
		meta = map[string]string{"field": "turn.messages"}
		msg = "turn.messages: " + te.Err.Error()
	case errors.Is(err, frontdoor.ErrNoChat):
		code, reason = codes.FailedPrecondition, ReasonNoChatTemplate
		msg = "the model has no chat template (the operator may choose a fallback: weft serve --chat-template)"
	case errors.Is(err, scheduler.ErrPromptTooLong):
		code, reason = codes.InvalidArgument, ReasonPromptTooLong
	case errors.Is(err, scheduler.ErrTokenOutOfRange):
		code, reason = codes.InvalidArgument, ReasonTokenOutOfRange
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

// inputStatus is the status of one refused input of an Embed: its field
// is inputs[i]; a token count over the context names the whole context as
// the bound (an embedding generates nothing after its input).
func inputStatus(ie *frontdoor.InputError) (codes.Code, string, map[string]string, string) {
	field := fmt.Sprintf("inputs[%d]", ie.Index)
	var le *scheduler.LimitError
	var be *frontdoor.BytesError
	switch {
	case errors.As(ie.Err, &le):
		meta := limitMeta(le)
		meta["field"] = field
		if errors.Is(le, scheduler.ErrPromptTooLong) {
			meta["context_length"] = strconv.Itoa(le.Limit)
		}
		return codes.InvalidArgument, limitReason(le), meta, field + ": " + le.Detail()
	case errors.As(ie.Err, &be):
		return codes.InvalidArgument, ReasonPromptTooLong, map[string]string{
			"field":            field,
			"prompt_bytes":     strconv.Itoa(be.Bytes),
			"max_prompt_bytes": strconv.Itoa(be.MaxBytes),
			"context_length":   strconv.Itoa(be.ContextLen),
		}, field + ": " + be.Detail()
	case errors.Is(ie.Err, frontdoor.ErrEmptyInput):
		return codes.InvalidArgument, ReasonEmptyPrompt, map[string]string{"field": field + ".text"}, field + ".text: empty"
	}
	st := toStatus(ie.Err)
	return st.Code(), rejectReason(ie.Err), map[string]string{"field": field}, field + ": " + st.Message()
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

// wireFields renames the scheduler's, the sampler's and the frontdoor's
// field names to the proto's; a name not here is already the proto's.
var wireFields = map[string]string{
	"max_tokens":                "stopping.max_tokens",
	"min_tokens":                "stopping.min_tokens",
	"stop":                      "stopping.stop",
	"stop_token_ids":            "stopping.stop_token_ids",
	"temperature":               "sampling.temperature",
	"top_k":                     "sampling.top_k",
	"top_p":                     "sampling.top_p",
	"min_p":                     "sampling.min_p",
	"repetition_penalty":        "sampling.repetition_penalty",
	"presence_penalty":          "sampling.presence_penalty",
	"frequency_penalty":         "sampling.frequency_penalty",
	"top_logprobs":              "logprobs.top_n",
	frontdoor.FieldChatContents: "turn.messages.content",
	frontdoor.FieldChatPrompt:   "turn.messages",
	frontdoor.FieldEmbedInput:   "inputs",
}

func wireField(f string) string {
	if w, ok := wireFields[f]; ok {
		return w
	}
	return f
}

// limitReason is the ErrorInfo reason of a scheduler limit.
func limitReason(le *scheduler.LimitError) string {
	switch {
	case errors.Is(le, scheduler.ErrPromptTooLong):
		return ReasonPromptTooLong
	case errors.Is(le, scheduler.ErrTokenOutOfRange):
		return ReasonTokenOutOfRange
	case errors.Is(le, scheduler.ErrEmptyPrompt):
		return ReasonEmptyPrompt
	}
	return ReasonInvalidParameter
}

// limitMeta is the ErrorInfo metadata of a scheduler limit: the field, the
// bound ("limit", compared as "op" says) and the request's value; a prompt
// over the context also names its tokens and the context length.
func limitMeta(le *scheduler.LimitError) map[string]string {
	m := map[string]string{
		"field": wireField(le.Field),
		"limit": strconv.Itoa(le.Limit),
		"op":    le.Op,
		"value": strconv.Itoa(le.Got),
	}
	if errors.Is(le, scheduler.ErrPromptTooLong) {
		// Limits.MaxPromptTokens is ContextLen-1: one token must fit.
		m["prompt_tokens"] = strconv.Itoa(le.Got)
		m["context_length"] = strconv.Itoa(le.Limit + 1)
	}
	return m
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
