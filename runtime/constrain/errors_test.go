package constrain

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestSchemaErrors(t *testing.T) {
	for _, tc := range []struct {
		schema, want string
		tooLarge     bool
	}{
		{`{"type":"string","contentEncoding":"base64"}`, "contentEncoding", false},
		{`{"type":"object","minProperties":1,"patternProperties":{}}`, "minProperties, patternProperties", false},
		{`{"allOf":[{"type":"integer"}]}`, "allOf", false},
		{`{"type":"array","prefixItems":[{}]}`, "prefixItems", false},
		{`{"type":"string","format":"ipv4"}`, `format "ipv4"`, false},
		{`{"$ref":"https://example.com/s.json"}`, "only references within the schema", false},
		{`{"$defs":{},"$ref":"#/$defs/missing"}`, `no "missing"`, false},
		{`{"type":"integer","minimum":5,"maximum":4}`, "no value", false},
		{`{"type":"integer","maximum":1e300}`, "2^53", false},
		{`{"type":"object","properties":{"a":{}},"required":["b"]}`, `"b"`, false},
		{`{"type":"strange"}`, `unknown type "strange"`, false},
		{`false`, "admits no value", false},
		{`{"type":`, "not JSON", false},
		{`{"type":"string","minLength":100000}`, "over 4096", true},
		{`{"type":"string","pattern":"a","maxLength":3}`, "cannot be combined", false},
		{`{"type":"string","pattern":"(?m)^a"}`, "line anchor", false},
		{strings.Repeat(`{"items":`, 100) + `{}` + strings.Repeat(`}`, 100), "nested deeper", true},
		{`{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "without consuming input", false},
		{manyStrings(70), "exceeds", true},
	} {
		_, err := CompileJSONSchema(tc.schema)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60s: got %v, want an error containing %q", tc.schema, err, tc.want)
			continue
		}
		if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrTooLarge) != tc.tooLarge {
			t.Errorf("%.60s: %v: ErrInvalid %v, ErrTooLarge %v (want %v)", tc.schema, err,
				errors.Is(err, ErrInvalid), errors.Is(err, ErrTooLarge), tc.tooLarge)
		}
	}
}

// manyStrings is an object schema with n properties, each a string of up
// to MaxRepeat characters: about n*MaxRepeat grammar elements.
func manyStrings(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string","maxLength":4096}`, i)
	}
	b.WriteString("}}")
	return b.String()
}

func TestGrammarAndRegexErrors(t *testing.T) {
	for _, tc := range []struct {
		gbnf, want string
	}{
		{`item ::= "a"`, "no rule named root"},
		{`root ::= x`, `"x" is used but not defined`},
		{`root ::= "a`, "unterminated string"},
		{`root ::= [a-`, "unterminated character class"},
		{`root ::= ("a"`, "unclosed ("},
		{`root ::= root "a"`, "without consuming input"},
		{`root ::= ("a"?)*`, "without consuming input"},
		{`root ::= "a"{9999}`, "over 4096"},
		{`root ::= "a" root ::= "b"`, "defined twice"},
		{`root ::= "\q"`, `unknown escape`},
	} {
		_, err := CompileGBNF(tc.gbnf)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: got %v, want an error containing %q", tc.gbnf, err, tc.want)
		}
	}
	for _, tc := range []struct{ re, want string }{
		{`a(`, "missing closing )"},
		{`\bword`, "word boundary"},
		{`a^b`, "^ inside"},
		{`(a{1000}){1000}`, "invalid repeat count"},
	} {
		_, err := CompileRegex(tc.re)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: got %v, want an error containing %q", tc.re, err, tc.want)
		}
	}
	if _, err := CompileChoice(nil); err == nil {
		t.Error("empty choice list accepted")
	}
}

// TestMatch checks the automata on texts chosen by hand, including the
// edges of integer and number bounds.
func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		schema   string
		yes, not []string
	}{
		{`{"type":"integer","minimum":-37,"maximum":1205}`,
			[]string{"-37", "-1", "0", "9", "10", "999", "1000", "1205", "1199"},
			[]string{"-38", "-0", "1206", "01", "2000", "1.5", ""}},
		{`{"type":"integer","exclusiveMinimum":9,"exclusiveMaximum":100}`,
			[]string{"10", "99"}, []string{"9", "100"}},
		{`{"type":"integer","minimum":250}`,
			[]string{"250", "999", "1000", "123456789"}, []string{"249", "99", "-5"}},
		{`{"type":"integer","maximum":-12}`,
			[]string{"-12", "-13", "-100000"}, []string{"-11", "0", "5"}},
		{`{"type":"number","minimum":-2.5,"maximum":17.25}`,
			[]string{"-2", "0", "17", "0.5", "16.999", "-1.5"}, []string{"17.5", "-3", "18", "1.0", "1e2"}},
		{`{"type":"number"}`,
			[]string{"0", "-0.5", "1e10", "2.5E-3", "12"}, []string{"01", "1.", ".5", "1e100", "+1"}},
		{`{"type":"string"}`,
			[]string{`""`, `"a\"b"`, `"\u00e9"`, `"é日本"`, `"` + strings.Repeat("x", 3000) + `"`},
			[]string{`"a`, `"\ud800"`, "\"\x01\"", `"\x"`, "\"\xff\""}},
		{`{"type":"string","minLength":2,"maxLength":3}`,
			[]string{`"ab"`, `"日本語"`, `"a\nb"`}, []string{`"a"`, `"abcd"`}},
		{`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},"required":["b"]}`,
			[]string{`{"b":1}`, `{"a":1,"b":2}`, `{"b":1,"c":2}`, `{"a":1,"b":2,"c":3}`},
			[]string{`{}`, `{"a":1}`, `{"b":1,"a":2}`, `{,"b":1}`, `{"b":1,}`}},
		{`{"type":"string","format":"date"}`,
			[]string{`"2024-02-28"`, `"1999-12-31"`}, []string{`"2024-02-30"`, `"2024-13-01"`, `"2024-04-31"`}},
	} {
		g, err := CompileJSONSchema(tc.schema)
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		for _, s := range tc.yes {
			if !g.Match([]byte(s)) {
				t.Errorf("%s: %.40q not accepted", tc.schema, s)
			}
		}
		for _, s := range tc.not {
			if g.Match([]byte(s)) {
				t.Errorf("%s: %q accepted", tc.schema, s)
			}
		}
	}
}

// TestDeepNestingBounded: a recursive schema cannot nest past
// MaxStackDepth, and the state stays bounded on the way.
func TestDeepNestingBounded(t *testing.T) {
	g, err := CompileJSONSchema(`{"type":"array","items":{"$ref":"#"}}`)
	if err != nil {
		t.Fatal(err)
	}
	s := g.Start()
	n := 0
	for ; n < 10*MaxStackDepth && !s.Dead(); n++ {
		s = g.Advance(s, '[')
	}
	if !s.Dead() || n > MaxStackDepth+1 {
		t.Fatalf("nesting went on for %d levels", n)
	}
}

// TestRepeatBounded: a repetition of a long sequence is refused by its
// size before it is built; nested groups stay small (each group is one
// rule, referenced by each copy).
func TestRepeatBounded(t *testing.T) {
	long := `root ::= "` + strings.Repeat("x", 1000) + `"{4000}`
	if _, err := CompileGBNF(long); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a 1000-byte literal 4000 times: %v, want ErrTooLarge", err)
	}
	g, err := CompileGBNF(`root ::= (("a"{4096}){4096}){4096}`)
	if err != nil {
		t.Fatal(err)
	}
	if g.Size() > 3*4096+16 {
		t.Errorf("nested groups: %d elements", g.Size())
	}
}
