package constrain

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"testing"
)

// seeds per case and vocabulary; maxGen bounds one generation.
const (
	nSeeds = 3
	maxGen = 300
)

// TestSchemasGenerate: every test schema, sampled at temperature 1 with
// several seeds on both vocabularies, gives output that ends (an
// end-of-generation token once complete), parses, and validates against
// the schema with an independent validator (formats asserted).
func TestSchemasGenerate(t *testing.T) {
	vocabs := allVocabs(t)
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

var regexCases = []string{
	`[a-z]+@[a-z]+\.com`,
	`(cat|dog)s?`,
	`\d{3}-\d{4}`,
	`[A-Z][a-z]{2,5}( [A-Z][a-z]{2,5})?`,
	`(?i)hello`,
	`0x[0-9a-fA-F]{1,8}`,
	`[^\n"]{1,10}`,
	`é+ü?ß`,
	`\p{Greek}{1,3}`,
	`^(yes|no)$`,
	`(a|b)*c`,
	`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}`,
}

func TestRegexGenerate(t *testing.T) {
	vocabs := allVocabs(t)
	for _, expr := range regexCases {
		t.Run(expr, func(t *testing.T) {
			g, err := CompileRegex(expr)
			if err != nil {
				t.Fatal(err)
			}
			re := regexp.MustCompile(`^(?:` + expr + `)$`)
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
	values := []string{"positive", "negative", "neutral", "pos", "ünïcode"}
	g, err := CompileChoice(values)
	if err != nil {
		t.Fatal(err)
	}
	for _, tv := range allVocabs(t) {
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

// Grammars written in llama.cpp's GBNF dialect, of the kinds its examples
// cover: arithmetic, a list, JSON.
var gbnfCases = []struct {
	name, grammar string
	check         func([]byte) error
}{
	{"arithmetic", `
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")"
number ::= [0-9]{1,4}
`, checkArith},
	{"list", `
root ::= item{1,4}
item ::= "- " [a-z ]+ "\n"  # one entry per line
`, func(b []byte) error {
		if !regexp.MustCompile(`^(- [a-z ]+\n){1,4}$`).Match(b) {
			return fmt.Errorf("not a list")
		}
		return nil
	}},
	{"json", `
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ( string ":" value ( "," string ":" value )* )? "}"
array  ::= "[" ( value ( "," value )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]{0,5} ) ( "." [0-9]{1,4} )?
`, func(b []byte) error {
		var v map[string]any
		return json.Unmarshal(b, &v)
	}},
}

// checkArith parses an arithmetic expression by recursive descent.
func checkArith(b []byte) error {
	pos := 0
	var expr func() bool
	number := func() bool {
		start := pos
		for pos < len(b) && b[pos] >= '0' && b[pos] <= '9' {
			pos++
		}
		return pos > start
	}
	factor := func() bool {
		if pos < len(b) && b[pos] == '(' {
			pos++
			if !expr() || pos >= len(b) || b[pos] != ')' {
				return false
			}
			pos++
			return true
		}
		return number()
	}
	chain := func(sub func() bool, ops string) bool {
		if !sub() {
			return false
		}
		for pos < len(b) && (b[pos] == ops[0] || b[pos] == ops[1]) {
			pos++
			if !sub() {
				return false
			}
		}
		return true
	}
	term := func() bool { return chain(factor, "*/") }
	expr = func() bool { return chain(term, "+-") }
	if !expr() || pos != len(b) {
		return fmt.Errorf("not an expression at byte %d", pos)
	}
	return nil
}

func TestGBNFGenerate(t *testing.T) {
	vocabs := allVocabs(t)
	for _, gc := range gbnfCases {
		t.Run(gc.name, func(t *testing.T) {
			g, err := CompileGBNF(gc.grammar)
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
					if err := gc.check(out); err != nil {
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
	for _, expr := range regexCases[:4] {
		g, err := CompileRegex(expr)
		if err != nil {
			t.Fatal(err)
		}
		grammars = append(grammars, g)
	}
	for _, gc := range gbnfCases {
		g, err := CompileGBNF(gc.grammar)
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
