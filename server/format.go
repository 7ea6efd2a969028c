package server

import (
	"container/list"
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

// formatCache compiles response formats against the model's vocabulary
// and keeps the most recently used ones, so a repeated schema costs a map
// lookup and reuses its cached masks. Its zero value is ready.
type formatCache struct {
	once   sync.Once
	vocab  *constrain.Vocab
	pieces [][]byte

	mu    sync.Mutex
	order *list.List // of *formatEntry, most recent first
	byKey map[string]*list.Element
}

type formatEntry struct {
	key string
	c   *constrain.Constraint
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
	var key string
	var compile func() (*constrain.Grammar, error)
	switch v := f.GetFormat().(type) {
	case nil:
		return nil, formatErr("no format set")
	case *inferencev1.ResponseFormat_JsonSchema:
		text := v.JsonSchema.GetSchema()
		key, compile = "s"+text, func() (*constrain.Grammar, error) { return constrain.CompileJSONSchema(text) }
	case *inferencev1.ResponseFormat_JsonObject:
		if !v.JsonObject {
			return nil, nil
		}
		key, compile = "o", func() (*constrain.Grammar, error) { return constrain.JSONObject(), nil }
	case *inferencev1.ResponseFormat_Regex:
		key, compile = "r"+v.Regex, func() (*constrain.Grammar, error) { return constrain.CompileRegex(v.Regex) }
	case *inferencev1.ResponseFormat_Grammar:
		key, compile = "g"+v.Grammar, func() (*constrain.Grammar, error) { return constrain.CompileGBNF(v.Grammar) }
	case *inferencev1.ResponseFormat_Choice:
		vals := v.Choice.GetValues()
		k := []byte{'c'}
		for _, x := range vals {
			k = append(k, x...)
			k = append(k, 0)
		}
		key, compile = string(k), func() (*constrain.Grammar, error) { return constrain.CompileChoice(vals) }
	}
	c, err := s.formats.get(s.cfg.Tokenizer, key, compile)
	if err != nil {
		return nil, err
	}
	return constraintSource{c}, nil
}

func formatErr(format string, args ...any) error {
	return reqErr(codes.InvalidArgument, ReasonInvalidResponseFormat, "response_format", format, args...)
}

func (fc *formatCache) get(tok Tokenizer, key string, compile func() (*constrain.Grammar, error)) (*constrain.Constraint, error) {
	vt, ok := tok.(vocabTokenizer)
	if !ok {
		return nil, reqErr(codes.FailedPrecondition, ReasonInvalidResponseFormat, "response_format",
			"the model's tokenizer cannot report token bytes")
	}
	fc.once.Do(func() {
		fc.pieces = make([][]byte, tok.VocabSize())
		for i := range fc.pieces {
			fc.pieces[i] = vt.TokenBytes(int32(i))
		}
		fc.vocab = constrain.NewVocab(fc.pieces, vt.EOGs())
		fc.order = list.New()
		fc.byKey = map[string]*list.Element{}
	})
	fc.mu.Lock()
	if e, ok := fc.byKey[key]; ok {
		fc.order.MoveToFront(e)
		c := e.Value.(*formatEntry).c
		fc.mu.Unlock()
		return c, nil
	}
	fc.mu.Unlock()
	// Compile outside the lock: compilation is bounded but not free, and
	// other requests should not wait behind it.
	g, err := compile()
	if err != nil {
		if errors.Is(err, constrain.ErrInvalid) {
			return nil, formatErr("%v", err)
		}
		return nil, err
	}
	c := constrain.NewConstraint(g, fc.vocab, fc.pieces)
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if e, ok := fc.byKey[key]; ok { // compiled meanwhile by another request
		return e.Value.(*formatEntry).c, nil
	}
	fc.byKey[key] = fc.order.PushFront(&formatEntry{key: key, c: c})
	if fc.order.Len() > maxCachedFormats {
		last := fc.order.Back()
		fc.order.Remove(last)
		delete(fc.byKey, last.Value.(*formatEntry).key)
	}
	return c, nil
}
