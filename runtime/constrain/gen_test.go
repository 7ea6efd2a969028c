package constrain

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/runtime/constrain/constraintest"
)

// seeds per case and vocabulary; maxGen bounds one generation.
const (
	nSeeds = 3
	maxGen = 300
)

// The generation tests below sample from a fake model (random logits with
// a bias toward closing tokens, see generate) over stories260K's
// vocabulary, so that every case ends within a small budget and a failure
// is a property of the masks alone. The same cases run on real forward
// passes end to end in the server package: on stories260K, and on
// synth-110m with the Llama-2 32,000-token vocabulary
// (server/format_synth_test.go).

// TestSchemasGenerate: every test schema, sampled at temperature 1 with
// several seeds, gives output that ends (an end-of-generation token once
// complete), parses, and validates against the schema with an independent
// validator (formats asserted).
func TestSchemasGenerate(t *testing.T) {
	vocabs := genVocabs(t)
	for _, sc := range loadSchemas(t) {
		t.Run(sc.Name, func(t *testing.T) {
			g, err := CompileJSONSchema(string(sc.Schema))
			if err != nil {
				t.Fatal(err)
			}
			sch := validator(t, sc.Schema)
			for _, tv := range vocabs {
				c := NewConstraint(g, tv.v, tv.pieces)
				for seed := range uint64(nSeeds) {
					out, ended := generate(tv, c, seed, maxGen)
					if !ended {
						t.Fatalf("%s seed %d: no end within %d tokens: %s", tv.name, seed, maxGen, out)
					}
					if !json.Valid(out) {
						t.Fatalf("%s seed %d: not JSON: %s", tv.name, seed, out)
					}
					if err := validate(sch, out); err != nil {
						t.Fatalf("%s seed %d: %s: %v", tv.name, seed, out, err)
					}
					if !g.Match(out) {
						t.Fatalf("%s seed %d: the grammar does not accept its own output %s", tv.name, seed, out)
					}
				}
			}
		})
	}
}

func TestRegexGenerate(t *testing.T) {
	vocabs := genVocabs(t)
	for _, expr := range constraintest.Regexes {
		t.Run(expr, func(t *testing.T) {
			g, err := CompileRegex(expr)
			if err != nil {
				t.Fatal(err)
			}
			re := constraintest.WholeMatch(expr)
			for _, tv := range vocabs {
				c := NewConstraint(g, tv.v, tv.pieces)
				for seed := range uint64(nSeeds) {
					out, ended := generate(tv, c, seed, maxGen)
					if !ended || !re.Match(out) {
						t.Fatalf("%s seed %d: ended %v, %q does not match", tv.name, seed, ended, out)
					}
				}
			}
		})
	}
}

func TestChoiceGenerate(t *testing.T) {
	values := constraintest.Choices
	g, err := CompileChoice(values)
	if err != nil {
		t.Fatal(err)
	}
	for _, tv := range genVocabs(t) {
		c := NewConstraint(g, tv.v, tv.pieces)
		seen := map[string]bool{}
		for seed := range uint64(20) {
			out, ended := generate(tv, c, seed, maxGen)
			if !ended {
				t.Fatalf("%s seed %d: no end: %q", tv.name, seed, out)
			}
			ok := false
			for _, v := range values {
				ok = ok || v == string(out)
			}
			if !ok {
				t.Fatalf("%s seed %d: %q is not a choice", tv.name, seed, out)
			}
			seen[string(out)] = true
		}
		if len(seen) < 2 {
			t.Errorf("%s: 20 seeds gave only %v", tv.name, seen)
		}
	}
}

func TestGBNFGenerate(t *testing.T) {
	vocabs := genVocabs(t)
	for _, gc := range constraintest.Grammars {
		t.Run(gc.Name, func(t *testing.T) {
			g, err := CompileGBNF(gc.Text)
			if err != nil {
				t.Fatal(err)
			}
			for _, tv := range vocabs {
				c := NewConstraint(g, tv.v, tv.pieces)
				for seed := range uint64(nSeeds) {
					out, ended := generate(tv, c, seed, maxGen)
					if !ended {
						t.Fatalf("%s seed %d: no end: %q", tv.name, seed, out)
					}
					if err := gc.Check(out); err != nil {
						t.Fatalf("%s seed %d: %q: %v", tv.name, seed, out, err)
					}
				}
			}
		})
	}
}

// TestMaskMatchesBruteForce compares masks with the reference (decode each
// token, run the automaton over its bytes) on states reached by random
// generation, for schemas, regexes and grammars on both vocabularies.
func TestMaskMatchesBruteForce(t *testing.T) {
	var grammars []*Grammar
	for i, sc := range loadSchemas(t) {
		if i%3 != 0 {
			continue // a third of them keeps the reference affordable
		}
		g, err := CompileJSONSchema(string(sc.Schema))
		if err != nil {
			t.Fatal(err)
		}
		grammars = append(grammars, g)
	}
	for _, expr := range constraintest.Regexes[:4] {
		g, err := CompileRegex(expr)
		if err != nil {
			t.Fatal(err)
		}
		grammars = append(grammars, g)
	}
	for _, gc := range constraintest.Grammars {
		g, err := CompileGBNF(gc.Text)
		if err != nil {
			t.Fatal(err)
		}
		grammars = append(grammars, g)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	for _, tv := range allVocabs(t) {
		for gi, g := range grammars {
			c := NewConstraint(g, tv.v, tv.pieces)
			seq := c.Start()
			for step := range 6 {
				st := seq.State()
				got := bits(seq.Allowed(), len(tv.pieces))
				want := bruteMask(g, tv, st)
				if d := diffMask(got, want, tv.pieces); d != "" {
					t.Fatalf("%s grammar %d step %d: mask differs from the reference: %s", tv.name, gi, step, d)
				}
				// Move on by a random allowed non-ending token.
				var allowed []int32
				for tok, ok := range got {
					if ok && !tv.tok.IsEOG(int32(tok)) {
						allowed = append(allowed, int32(tok))
					}
				}
				if len(allowed) == 0 {
					break
				}
				if err := seq.Accept(allowed[rng.IntN(len(allowed))]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestReplay: a sequence rebuilt from its tokens (a resumed, re-prefilled
// sequence replaying its output through Accept) reaches the same state and
// mask as the original.
func TestReplay(t *testing.T) {
	tv := loadVocab(t, "llama-32k", "vocab/ggml-vocab-llama-spm.gguf")
	g, err := CompileJSONSchema(schemaByName(t, "object-nested"))
	if err != nil {
		t.Fatal(err)
	}
	toks := trace(t, tv, g, 3)
	c := NewConstraint(g, tv.v, tv.pieces)
	orig := c.Start()
	for i, tok := range toks {
		if err := orig.Accept(tok); err != nil {
			t.Fatal(err)
		}
		replay := NewConstraint(g, tv.v, tv.pieces).Start()
		for _, p := range toks[:i+1] {
			if err := replay.Accept(p); err != nil {
				t.Fatal(err)
			}
		}
		if orig.State().key() != replay.State().key() {
			t.Fatalf("token %d: replayed state differs", i)
		}
		if d := diffMask(bits(orig.Allowed(), tv.v.Size()), bits(replay.Allowed(), tv.v.Size()), tv.pieces); d != "" {
			t.Fatalf("token %d: replayed mask differs: %s", i, d)
		}
	}
}
