// Package constraintest holds constraint test cases that the constrain
// package's tests and the server's end-to-end tests share: regular
// expressions, GBNF grammars each with a check of its language that does
// not use the constrain package, and a choice list. The JSON Schema cases
// are runtime/constrain/testdata/schemas.json.
package constraintest

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// Regexes are the regular-expression cases (RE2 syntax, matched whole).
var Regexes = []string{
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

// WholeMatch returns Go's regexp for expr, anchored at both ends: the
// reference an output constrained by expr is checked with.
func WholeMatch(expr string) *regexp.Regexp {
	return regexp.MustCompile(`^(?:` + expr + `)$`)
}

// Grammar is a GBNF grammar case with an independent check of its language.
type Grammar struct {
	Name, Text string
	// Check returns nil when b is in the grammar's language.
	Check func(b []byte) error
}

// Grammars are written in llama.cpp's GBNF dialect, of the kinds its
// examples cover: arithmetic, a list, JSON.
var Grammars = []Grammar{
	{"arithmetic", `
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")"
number ::= [0-9]{1,4}
`, CheckArith},
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

// Choices are the values of the choice case (one a prefix of another, one
// outside ASCII).
var Choices = []string{"positive", "negative", "neutral", "pos", "ünïcode"}

// CheckArith parses an arithmetic expression (the arithmetic grammar's
// language: integers, + - * /, parentheses, no spaces) by recursive descent.
func CheckArith(b []byte) error {
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
