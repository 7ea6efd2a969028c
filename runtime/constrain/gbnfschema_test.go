package constrain

import (
	"errors"
	"testing"
)

// TestGBNFSchemas: a rule defined by a JSON Schema matches exactly the
// compact JSON the schema validates, inside the grammar's own text.
func TestGBNFSchemas(t *testing.T) {
	const text = `root ::= "<call>" ( "a " args-0 | "b " args-1 ) "</call>"` + "\n"
	schemas := map[string]string{
		"args-0": `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"]}`,
		"args-1": `{"type":"object","properties":{"on":{"type":"boolean"}},"required":["on"],"additionalProperties":false}`,
	}
	g, err := CompileGBNFSchemas(text, schemas)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`<call>a {"city":"Paris"}</call>`, true},
		{`<call>a {"city":"Paris","days":3}</call>`, true},
		{`<call>b {"on":true}</call>`, true},
		{`<call>a {"days":3}</call>`, false},                // city is required
		{`<call>a {"city":"Paris","days":9}</call>`, false}, // days over its maximum
		{`<call>a {"city":1}</call>`, false},
		{`<call>b {"on":true,"x":1}</call>`, false},
		{`<call>a {"on":true}</call>`, false}, // the other tool's arguments
		{`<call>a {"city":"Paris"}`, false},
	} {
		if got := g.Match([]byte(tc.in)); got != tc.want {
			t.Errorf("Match(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	// The cache keys the schemas with the grammar.
	f1 := Format{Grammar: text, GrammarSchemas: schemas}
	f2 := Format{Grammar: text, GrammarSchemas: map[string]string{"args-0": schemas["args-0"], "args-1": `{"type":"object"}`}}
	k1, err1 := f1.key()
	k2, err2 := f2.key()
	if err1 != nil || err2 != nil || k1 == k2 {
		t.Errorf("keys %q (%v), %q (%v): want two different keys", k1, err1, k2, err2)
	}
	if _, err := (Format{GrammarSchemas: schemas}).key(); !errors.Is(err, ErrInvalid) {
		t.Errorf("GrammarSchemas without Grammar: err %v, want ErrInvalid", err)
	}
}

func TestGBNFSchemasErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		text    string
		schemas map[string]string
	}{
		{"defined twice", "root ::= a\na ::= \"x\"\n", map[string]string{"a": `{"type":"object"}`}},
		{"not JSON", "root ::= a\n", map[string]string{"a": `{`}},
		{"unsupported keyword", "root ::= a\n", map[string]string{"a": `{"type":"object","patternProperties":{}}`}},
		{"bad rule name", "root ::= \"x\"\n", map[string]string{"a b": `{}`}},
		{"undefined rule", "root ::= a b\n", map[string]string{"a": `{}`}},
	} {
		if _, err := CompileGBNFSchemas(tc.text, tc.schemas); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", tc.name, err)
		}
	}
}
