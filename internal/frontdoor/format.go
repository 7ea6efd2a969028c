package frontdoor

import (
	"errors"
	"sync"

	"github.com/weft-inference/weft/runtime/constrain"
	"github.com/weft-inference/weft/runtime/sample"
)

// ErrNoTokenBytes: structured output was asked of a model whose tokenizer
// cannot report each token's bytes.
var ErrNoTokenBytes = errors.New("the model's tokenizer cannot report token bytes")

// vocabTokenizer is implemented by a Tokenizer that can tell each token's
// output bytes (*tokenizer.Tokenizer does); structured output needs it.
type vocabTokenizer interface {
	TokenBytes(id int32) []byte
	EOGs() []int32
	VocabSize() int
}

// maxCachedFormats bounds the compiled formats kept (least recently used
// first out).
const maxCachedFormats = 64

// formatCache is the process's one constrain.Cache (and so its one
// vocabulary trie), built on the first request with a format. Its zero
// value is ready.
type formatCache struct {
	once  sync.Once
	cache *constrain.Cache // nil when the tokenizer cannot report token bytes
}

// constraintSource adapts a Constraint to the sampler's interface: each
// sequence gets its own state.
type constraintSource struct{ c *constrain.Constraint }

func (s constraintSource) NewState() sample.ConstraintState { return s.c.Start() }

// Constraint compiles f for the sampler, through the Door's cache of
// compiled formats (every door shares it). A format that does not compile
// is an error wrapping constrain.ErrInvalid; a tokenizer without token
// bytes is ErrNoTokenBytes.
func (d *Door) Constraint(f constrain.Format) (sample.Constraint, error) {
	fc := &d.formats
	fc.once.Do(func() {
		vt, ok := d.cfg.Tokenizer.(vocabTokenizer)
		if !ok {
			return
		}
		pieces := make([][]byte, vt.VocabSize())
		for i := range pieces {
			pieces[i] = vt.TokenBytes(int32(i))
		}
		fc.cache = constrain.NewCache(pieces, vt.EOGs(), maxCachedFormats)
	})
	if fc.cache == nil {
		return nil, ErrNoTokenBytes
	}
	c, err := fc.cache.Get(f)
	if err != nil {
		return nil, err
	}
	return constraintSource{c}, nil
}
