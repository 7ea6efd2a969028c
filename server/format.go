package server

import (
	"errors"

	"google.golang.org/grpc/codes"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/constrain"
	"github.com/weft-inference/weft/runtime/sample"
)

// ReasonInvalidResponseFormat: response_format cannot be compiled
// (malformed, unsupported keyword, over the size limits); the message
// names the problem.
const ReasonInvalidResponseFormat = "INVALID_RESPONSE_FORMAT"

// responseFormat decodes f (nil: no constraint) and compiles it through
// the Door's cache.
func (s *Server) responseFormat(f *inferencev1.ResponseFormat) (sample.Constraint, error) {
	if f == nil {
		return nil, nil
	}
	var cf constrain.Format
	switch v := f.GetFormat().(type) {
	case *inferencev1.ResponseFormat_JsonSchema:
		cf.JSONSchema = v.JsonSchema.GetSchema()
	case *inferencev1.ResponseFormat_JsonObject:
		if !v.JsonObject {
			return nil, nil
		}
		cf.JSONObject = true
	case *inferencev1.ResponseFormat_Regex:
		cf.Regex = v.Regex
	case *inferencev1.ResponseFormat_Grammar:
		cf.Grammar = v.Grammar
	case *inferencev1.ResponseFormat_Choice:
		cf.Choice = v.Choice.GetValues()
		if cf.Choice == nil {
			cf.Choice = []string{}
		}
	}
	c, err := s.door.Constraint(cf)
	switch {
	case errors.Is(err, frontdoor.ErrNoTokenBytes):
		return nil, reqErr(codes.FailedPrecondition, ReasonInvalidResponseFormat, "response_format", "%v", err)
	case errors.Is(err, constrain.ErrInvalid):
		return nil, reqErr(codes.InvalidArgument, ReasonInvalidResponseFormat, "response_format", "%v", err)
	}
	return c, err
}
