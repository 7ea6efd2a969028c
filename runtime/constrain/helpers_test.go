package constrain

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/runtime/tokenizer"
)

// testVocab is a real model vocabulary prepared for masking.
type testVocab struct {
	name   string
	tok    *tokenizer.Tokenizer
	pieces [][]byte
	v      *Vocab
	bias   []float32 // the fake model's preference (see generate)
}

// The two vocabularies the tests run on: stories260K's 512 tokens and the
// Llama-2 32,000-token SentencePiece vocabulary (the one synth-110m uses).
var vocabFiles = []struct{ name, rel string }{
	{"stories260K", "models/stories260K.gguf"},
	{"llama-32k", "vocab/ggml-vocab-llama-spm.gguf"},
}

var (
	vocabMu    sync.Mutex
	vocabCache = map[string]*testVocab{}
)

func loadVocab(tb testing.TB, name, rel string) *testVocab {
	tb.Helper()
	vocabMu.Lock()
	defer vocabMu.Unlock()
	if v, ok := vocabCache[name]; ok {
		return v
	}
	f, err := gguf.Open(shareddata.Path(tb, rel))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		tb.Fatal(err)
	}
	tv := &testVocab{name: name, tok: tok}
	tv.pieces = make([][]byte, tok.VocabSize())
	tv.bias = make([]float32, tok.VocabSize())
	for i := range tv.pieces {
		p := tok.TokenBytes(int32(i))
		tv.pieces[i] = p
		// Tokens that close things (strings, arrays, objects, groups,
		// lines) or hold separators are favoured and openers are not, so
		// that random generations end within a small token budget;
		// end-of-generation is favoured most of all.
		if bytes.ContainsAny(p, "\"]})\n@.,:-") && !bytes.ContainsAny(p, "{[(") {
			tv.bias[i] = 6
		}
	}
	for _, t := range tok.EOGs() {
		tv.bias[t] = 8
	}
	if len(tok.EOGs()) == 0 {
		tb.Fatalf("%s: no end-of-generation token", name)
	}
	tv.v = NewVocab(tv.pieces, tok.EOGs())
	vocabCache[name] = tv
	return tv
}

// genVocabs are the vocabularies the fake-model generation tests run on.
func genVocabs(tb testing.TB) []*testVocab {
	return []*testVocab{loadVocab(tb, "stories260K", "models/stories260K.gguf")}
}

func allVocabs(tb testing.TB) []*testVocab {
	var out []*testVocab
	for _, f := range vocabFiles {
		out = append(out, loadVocab(tb, f.name, f.rel))
	}
	return out
}

// source adapts a Constraint to the sampler (as the server does).
type source struct{ c *Constraint }

func (s source) NewState() sample.ConstraintState { return s.c.Start() }

// generate samples up to maxTokens tokens at temperature 1 from a fake
// model (uniform random logits plus the vocabulary's bias) under c, and
// returns the output bytes and whether an end-of-generation token ended it.
func generate(tv *testVocab, c *Constraint, seed uint64, maxTokens int) ([]byte, bool) {
	rng := rand.New(rand.NewPCG(seed, 77))
	s := sample.New(sample.Params{Temperature: 1, Seed: seed, Constraint: source{c}}, nil)
	logits := make([]float32, len(tv.pieces))
	var out []byte
	for range maxTokens {
		for i := range logits {
			logits[i] = 3*rng.Float32() + tv.bias[i]
		}
		tok := s.Sample(logits).Token
		if tv.tok.IsEOG(tok) {
			return out, true
		}
		out = append(out, tv.pieces[tok]...)
	}
	return out, false
}

type schemaCase struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

func loadSchemas(tb testing.TB) []schemaCase {
	tb.Helper()
	data, err := os.ReadFile("testdata/schemas.json")
	if err != nil {
		tb.Fatal(err)
	}
	var cases []schemaCase
	if err := json.Unmarshal(data, &cases); err != nil {
		tb.Fatal(err)
	}
	return cases
}

// validator compiles schema with format assertions on.
func validator(tb testing.TB, schema []byte) *jsonschema.Schema {
	tb.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		tb.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		tb.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		tb.Fatal(err)
	}
	return sch
}

func validate(sch *jsonschema.Schema, out []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// bruteMask is the reference mask of state st: token t is allowed when
// running the automaton over its bytes leaves it alive; end-of-generation
// tokens when st accepts.
func bruteMask(g *Grammar, tv *testVocab, st State) []bool {
	m := make([]bool, len(tv.pieces))
	for t, p := range tv.pieces {
		switch {
		case tv.tok.IsEOG(int32(t)):
			m[t] = st.Accepting()
		case len(p) > 0:
			m[t] = !g.AdvanceBytes(st, p).Dead()
		}
	}
	return m
}

func bits(m []uint64, n int) []bool {
	out := make([]bool, n)
	for t := range out {
		out[t] = m[t>>6]&(1<<(t&63)) != 0
	}
	return out
}

func diffMask(got, want []bool, pieces [][]byte) string {
	var d []string
	for t := range got {
		if got[t] != want[t] {
			sign := "-" // refused by the mask, allowed by the reference
			if got[t] {
				sign = "+"
			}
			d = append(d, sign+quote(pieces[t]))
			if len(d) > 8 {
				break
			}
		}
	}
	return strings.Join(d, " ")
}

func quote(b []byte) string {
	q, _ := json.Marshal(string(b))
	return string(q)
}
