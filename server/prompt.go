package server

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"

	"github.com/weft-inference/weft/runtime/tokenizer"
)

// checkPromptBytes refuses a text of n bytes longer than MaxPromptBytes,
// before any tokenization.
func (s *Server) checkPromptBytes(field string, n int) error {
	if n <= s.cfg.MaxPromptBytes {
		return nil
	}
	msg := fmt.Sprintf("%s: %d bytes of text, at most %d", field, n, s.cfg.MaxPromptBytes)
	if s.cfg.MaxPromptBytes == s.cfg.Info.ContextLen*PromptBytesPerToken {
		msg += fmt.Sprintf(" (%d bytes per token of the %d-token context)", PromptBytesPerToken, s.cfg.Info.ContextLen)
	}
	return &requestError{
		code:   codes.InvalidArgument,
		reason: ReasonPromptTooLong,
		msg:    msg,
		meta: map[string]string{
			"field":            field,
			"prompt_bytes":     strconv.Itoa(n),
			"max_prompt_bytes": strconv.Itoa(s.cfg.MaxPromptBytes),
			"context_length":   strconv.Itoa(s.cfg.Info.ContextLen),
		},
	}
}

// tokenize runs f holding one of the TokenizeConcurrency slots, so that a
// flood of large prompts queues here instead of taking every CPU (and
// memory) from the step loop. It gives up when ctx ends.
func (s *Server) tokenize(ctx context.Context, f func()) error {
	select {
	case s.tokSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.tokSem }()
	f()
	return nil
}

// encode tokenizes text under the concurrency bound.
func (s *Server) encode(ctx context.Context, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	var ids []int32
	err := s.tokenize(ctx, func() { ids = s.cfg.Tokenizer.Encode(text, addSpecial, parseSpecial) })
	return ids, err
}

// encodeSegments tokenizes segments under the concurrency bound.
func (s *Server) encodeSegments(ctx context.Context, segs []tokenizer.Segment, addSpecial bool) ([]int32, error) {
	var ids []int32
	err := s.tokenize(ctx, func() { ids = s.cfg.Tokenizer.EncodeSegments(segs, addSpecial) })
	return ids, err
}
