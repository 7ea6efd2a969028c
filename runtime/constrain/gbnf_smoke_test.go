package constrain

import "testing"

func TestGBNFSmoke(t *testing.T) {
	g, err := CompileGBNF(`
# arithmetic
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= num | "(" expr ")"
num ::= [0-9]+
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"1+2*(3-4)", "42", "(1)"} {
		if !g.Match([]byte(s)) {
			t.Errorf("no match %q", s)
		}
	}
	for _, s := range []string{"1+", "()", "a"} {
		if g.Match([]byte(s)) {
			t.Errorf("match %q", s)
		}
	}
	if _, err := CompileGBNF(`root ::= root "a" | "b"`); err == nil {
		t.Error("left recursion accepted")
	}
}
