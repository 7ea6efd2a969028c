package server

import (
	"errors"
	"sync"

	"google.golang.org/grpc/codes"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/runtime/constrain"
	"github.com/weft-inference/weft/runtime/sample"
)

// ReasonInvalidResponseFormat: response_format cannot be compiled
// (malformed, unsupported keyword, over the size limits); the message
// names the problem.
const ReasonInvalidResponseFormat = "INVALID_RESPONSE_FORMAT"

// vocabTokenizer is implemented by a Tokenizer that can tell each token's
// output bytes (*tokenizer.Tokenizer does); response_format needs it.
type vocabTokenizer interface {
	TokenBytes(id int32) []byte
	EOGs() []int32
}

// maxCachedFormats bounds the compiled response formats kept (least
// recently used first out).
const maxCachedFormats = 64

// formatCache is the server's constrain.Cache, built over the model's
// vocabulary on the first request with a format. Its zero value is ready.
type formatCache struct {
	once  sync.Once
	cache *constrain.Cache // nil when the tokenizer cannot report token bytes
}

// constraintSource adapts a Constraint to the sampler's interface: each
// sequence gets its own state.
type constraintSource struct{ c *constrain.Constraint }

func (s constraintSource) NewState() sample.ConstraintState { return s.c.Start() }

// responseFormat compiles f (nil: no constraint) for the sampler.
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
	fc := &s.formats
	fc.once.Do(func() {
		vt, ok := s.cfg.Tokenizer.(vocabTokenizer)
		if !ok {
			return
		}
		pieces := make([][]byte, s.cfg.Tokenizer.VocabSize())
		for i := range pieces {
			pieces[i] = vt.TokenBytes(int32(i))
		}
		fc.cache = constrain.NewCache(pieces, vt.EOGs(), maxCachedFormats)
	})
	if fc.cache == nil {
		return nil, reqErr(codes.FailedPrecondition, ReasonInvalidResponseFormat, "response_format",
			"the model's tokenizer cannot report token bytes")
	}
	c, err := fc.cache.Get(cf)
	if err != nil {
		if errors.Is(err, constrain.ErrInvalid) {
			return nil, reqErr(codes.InvalidArgument, ReasonInvalidResponseFormat, "response_format", "%v", err)
		}
		return nil, err
	}
	return constraintSource{c}, nil
}
