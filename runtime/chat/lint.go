package chat

import (
	"fmt"
	"strings"
)

// checkCycles rejects templates that could build a cyclic value. Printing,
// comparing or serializing a cyclic value (a namespace holding itself, a
// list appended to itself) recurses without end in the engine and kills
// the process with a Go stack overflow, which no recover can catch; the
// step budget does not see it because it happens inside one expression.
//
// A value can only become cyclic through mutation, and the engine has two
// kinds:
//
//   - the list and dict methods append, insert, extend, pop, update and
//     setdefault. Hugging Face renders templates in Jinja's
//     ImmutableSandboxedEnvironment, which forbids them; llama.cpp allows
//     them, and a few templates (Kimi K2's) keep a queue of tool call ids
//     with append and pop. pop, and append/insert of a value that can only
//     be a scalar (isScalarExpr), are allowed; any other call of a method
//     with one of these names is rejected.
//   - attribute assignment ({% set ns.x = EXPR %}). It is rejected when
//     EXPR may hold a namespace: when it names, other than to read one of
//     its attributes (v.attr), a variable that may hold one. Those are
//     found by propagation: namespace() itself, every attribute-assignment
//     target, and whatever is bound (set, for, macro parameters through
//     their call sites) from an expression that names one of them.
//
// The check works on the tokens of each tag, outside string literals, with
// macro-local scopes. It is conservative, and it is a heuristic over the
// source rather than a proof: the guarantee it gives is against cycles
// built in the ways above.
func checkCycles(source string) error {
	lexed := lexTags(source)
	tags := make([][]string, len(lexed))
	for i, lt := range lexed {
		tags[i] = lt.toks
	}

	// Scopes: 0 is the top level, each macro gets its own.
	type macroDef struct {
		scope  int
		params []string
	}
	macros := map[string][]macroDef{}
	local := map[int]map[string]bool{} // names bound inside each macro
	scopeOf := make([]int, len(tags))
	stack := []int{0}
	n := 0
	mark := func(m map[int]map[string]bool, sc int, name string) bool {
		if m[sc] == nil {
			m[sc] = map[string]bool{}
		}
		if m[sc][name] {
			return false
		}
		m[sc][name] = true
		return true
	}
	for i, toks := range tags {
		if len(toks) > 0 && toks[0] == "endmacro" && len(stack) > 1 {
			stack = stack[:len(stack)-1]
		}
		if len(toks) > 1 && toks[0] == "macro" {
			n++
			stack = append(stack, n)
			params := macroParams(toks)
			macros[toks[1]] = append(macros[toks[1]], macroDef{scope: n, params: params})
			for _, p := range params {
				mark(local, n, p)
			}
		}
		scopeOf[i] = stack[len(stack)-1]
		for _, name := range bindings(toks) {
			mark(local, scopeOf[i], name)
		}
	}

	scalars := scalarNames(tags)
	tainted := map[int]map[string]bool{}
	isTainted := func(sc int, name string) bool {
		if name == "namespace" || tainted[sc][name] {
			return true
		}
		return sc != 0 && !local[sc][name] && tainted[0][name]
	}
	// holds reports whether toks (an expression) may evaluate to, or
	// contain, a tainted value.
	holds := func(sc int, toks []string) bool {
		for j, tk := range toks {
			if isIdent(tk) && (j == 0 || toks[j-1] != ".") && (j+1 == len(toks) || toks[j+1] != ".") && isTainted(sc, tk) {
				return true
			}
		}
		return false
	}

	for i, toks := range tags {
		if t, ok := attrTarget(toks); ok {
			mark(tainted, scopeOf[i], t)
		}
		for j := 1; j < len(toks); j++ {
			if toks[j] == "(" && toks[j-1] != "." && mutators[toks[j-1]] && j >= 2 && toks[j-2] == "." {
				if safeMutation(toks[j-1], splitArgs(toks[j:]), scalars) {
					continue
				}
				return fmt.Errorf("line %d: method .%s() is not supported: it modifies a list or dict in place, which Hugging Face's sandbox forbids and which could form a cycle", lexed[i].line, toks[j-1])
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for i, toks := range tags {
			sc := scopeOf[i]
			if len(toks) == 0 {
				continue
			}
			// set a, b = EXPR / for a, b in EXPR.
			if toks[0] == "set" || toks[0] == "for" {
				if k := indexOf(toks, "="); toks[0] == "set" && k > 0 && holds(sc, toks[k+1:]) {
					for _, name := range bindings(toks) {
						changed = mark(tainted, sc, name) || changed
					}
				}
				if k := indexOf(toks, "in"); toks[0] == "for" && k > 0 && holds(sc, toks[k+1:]) {
					for _, name := range bindings(toks) {
						changed = mark(tainted, sc, name) || changed
					}
				}
			}
			// Macro calls: a tainted argument taints the parameter.
			for j := 0; j+1 < len(toks); j++ {
				defs, ok := macros[toks[j]]
				if !ok || toks[j+1] != "(" || (j > 0 && toks[j-1] == ".") {
					continue
				}
				for pos, arg := range splitArgs(toks[j+1:]) {
					if !holds(sc, arg) {
						continue
					}
					for _, d := range defs {
						if len(arg) > 2 && isIdent(arg[0]) && arg[1] == "=" {
							changed = mark(tainted, d.scope, arg[0]) || changed
						} else if pos < len(d.params) {
							changed = mark(tainted, d.scope, d.params[pos]) || changed
						} else {
							for _, p := range d.params {
								changed = mark(tainted, d.scope, p) || changed
							}
						}
					}
				}
			}
		}
	}

	for i, toks := range tags {
		if t, ok := attrTarget(toks); ok {
			if k := indexOf(toks, "="); k > 0 && holds(scopeOf[i], toks[k+1:]) {
				return fmt.Errorf("line %d: {%% set %s.… %%} is not supported: it stores a value that may hold a namespace, which could form a cycle", lexed[i].line, t)
			}
		}
	}
	return nil
}

var mutators = map[string]bool{
	"append": true, "insert": true, "extend": true, "pop": true, "update": true, "setdefault": true,
}

// safeMutation reports whether a call of the list method name with args
// cannot make a value contain itself: pop only removes, and append(x) or
// insert(i, x) are safe when x is a scalar expression (isScalarExpr), as
// in Kimi K2's queue of tool call ids.
func safeMutation(name string, args [][]string, scalars map[string]bool) bool {
	switch name {
	case "pop":
		return true
	case "append":
		return len(args) == 1 && isScalarExpr(args[0], scalars)
	case "insert":
		return len(args) == 2 && isScalarExpr(args[1], scalars)
	}
	return false
}

// scalarGlobals are the variables this package gives templates that hold
// strings or booleans.
var scalarGlobals = setOf("bos_token", "eos_token", "add_generation_prompt", "enable_thinking",
	"reasoning_effort", "date_string", "true", "false", "none", "True", "False", "None")

// stringFilters are filters whose result is a string or a number.
var stringFilters = setOf("string", "tojson", "trim", "lower", "upper", "title", "capitalize",
	"length", "count", "int", "float", "join", "replace", "indent", "wordcount", "e", "escape", "safe")

// isScalarExpr reports whether the expression toks can only evaluate to a
// string, number or boolean: a literal; a name in scalars or
// scalarGlobals; a "~" concatenation, or a "+" with a string literal
// operand (the engine then concatenates strings); a comparison or test; a
// string-valued last filter; or one of these in parentheses. Conditional
// expressions and and/or (which return an operand) are not.
func isScalarExpr(toks []string, scalars map[string]bool) bool {
	if len(toks) == 0 {
		return false
	}
	if len(toks) == 1 {
		t := toks[0]
		return t == `"` || (t[0] >= '0' && t[0] <= '9') || scalars[t] || scalarGlobals[t]
	}
	var plus, tilde, compare, literalOperand bool
	lastFilter := ""
	depth := 0
	for j, t := range toks {
		switch t {
		case "(", "[", "{":
			depth++
			continue
		case ")", "]", "}":
			depth--
			continue
		}
		if depth != 0 {
			continue
		}
		switch t {
		case "if", "else", "and", "or":
			return false
		case "+":
			plus = true
		case "~":
			tilde = true
		case "=", "!", "<", ">", "in", "not", "is":
			compare = true
		case `"`:
			if (j == 0 || toks[j-1] == "+") && (j+1 == len(toks) || toks[j+1] == "+") {
				literalOperand = true
			}
		case "|":
			if j+1 < len(toks) {
				lastFilter = toks[j+1]
			}
		}
	}
	switch {
	case tilde || compare || (plus && literalOperand):
		return true
	case lastFilter != "" && stringFilters[lastFilter] && toks[len(toks)-1] != "]":
		// A filter ends the expression (optionally with its arguments):
		// x | string, x | join(", ").
		return true
	case toks[0] == "(" && toks[len(toks)-1] == ")" && closes(toks):
		return isScalarExpr(toks[1:len(toks)-1], scalars)
	}
	return false
}

// closes reports whether the "(" at toks[0] is closed by the last token.
func closes(toks []string) bool {
	depth := 0
	for j, t := range toks {
		switch t {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
			if depth == 0 {
				return j == len(toks)-1
			}
		}
	}
	return false
}

// scalarNames returns the names that can only hold scalars: every binding
// of the name anywhere in the template is "{% set NAME = EXPR %}" with a
// scalar EXPR (given the names found so far) or a block set
// "{% set NAME %}...{% endset %}" (a string); loop variables, macro
// parameters and multiple-target sets never are.
func scalarNames(tags [][]string) map[string]bool {
	type binding struct {
		expr  []string
		block bool
	}
	binds := map[string][]binding{}
	unsafe := map[string]bool{}
	for _, toks := range tags {
		if len(toks) < 2 {
			continue
		}
		switch toks[0] {
		case "set":
			k := indexOf(toks, "=")
			switch {
			case k < 0 && len(toks) == 2 && isIdent(toks[1]):
				binds[toks[1]] = append(binds[toks[1]], binding{block: true})
			case k == 2 && isIdent(toks[1]):
				binds[toks[1]] = append(binds[toks[1]], binding{expr: toks[3:]})
			default:
				for _, n := range bindings(toks) {
					unsafe[n] = true
				}
			}
		case "for":
			for _, n := range bindings(toks) {
				unsafe[n] = true
			}
		case "macro":
			for _, n := range macroParams(toks) {
				unsafe[n] = true
			}
		}
	}
	scalar := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for name, bs := range binds {
			if scalar[name] || unsafe[name] {
				continue
			}
			ok := true
			for _, b := range bs {
				if !b.block && !isScalarExpr(b.expr, scalar) {
					ok = false
					break
				}
			}
			if ok {
				scalar[name] = true
				changed = true
			}
		}
	}
	return scalar
}

// lexedTag is the tokens of one tag and the line (from 1) where it starts.
type lexedTag struct {
	toks []string
	line int
}

// lexTags returns the tokens of every {{ }} and {% %} tag of source,
// skipping comments and {% raw %} blocks.
func lexTags(source string) []lexedTag {
	var tags []lexedTag
	inRaw := false
	line, counted := 1, 0 // line of source[counted]
	for i := 0; ; {
		t, ok := nextTag(source, i)
		if !ok {
			break
		}
		i = t.next
		if t.closer == "#}" {
			continue
		}
		content := source[t.start:t.end]
		if t.closer == "%}" {
			switch w := firstWord(content); {
			case inRaw:
				if w == "endraw" {
					inRaw = false
				}
				continue
			case w == "raw":
				inRaw = true
				continue
			}
		} else if inRaw {
			continue
		}
		line += strings.Count(source[counted:t.start], "\n")
		counted = t.start
		tags = append(tags, lexedTag{toks: exprTokens(content), line: line})
	}
	return tags
}

// attrTarget recognizes "set NAME.attr = ..." and returns NAME.
func attrTarget(toks []string) (string, bool) {
	if len(toks) >= 5 && toks[0] == "set" && isIdent(toks[1]) && toks[2] == "." {
		return toks[1], true
	}
	return "", false
}

func indexOf(toks []string, s string) int {
	for i, t := range toks {
		if t == s {
			return i
		}
	}
	return -1
}

// splitArgs splits the tokens of a call, starting at its "(", into its
// arguments.
func splitArgs(toks []string) [][]string {
	var args [][]string
	depth, start := 0, 1
	for j, t := range toks {
		switch t {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
			if depth == 0 {
				if j > start {
					args = append(args, toks[start:j])
				}
				return args
			}
		case ",":
			if depth == 1 {
				args = append(args, toks[start:j])
				start = j + 1
			}
		}
	}
	return args
}

// macroParams returns the parameter names of a "macro name(p1, p2=d, ...)"
// tag.
func macroParams(toks []string) []string {
	var names []string
	depth := 0
	for j := 2; j < len(toks); j++ {
		switch toks[j] {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
		default:
			if depth == 1 && isIdent(toks[j]) && (toks[j-1] == "(" || toks[j-1] == ",") {
				names = append(names, toks[j])
			}
		}
	}
	return names
}

// bindings returns the names a set or for tag binds (not attribute
// targets).
func bindings(toks []string) []string {
	if len(toks) < 2 || (toks[0] != "set" && toks[0] != "for") {
		return nil
	}
	var names []string
	for j := 1; j < len(toks) && toks[j] != "=" && toks[j] != "in"; j++ {
		if isIdent(toks[j]) && toks[j-1] != "." && (j+1 == len(toks) || toks[j+1] != ".") {
			names = append(names, toks[j])
		}
	}
	return names
}

func isIdent(s string) bool {
	return s != "" && (s[0] == '_' || s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z')
}

// exprTokens splits a tag's content into identifiers, numbers, single
// punctuation characters and string literals (returned as `"`), skipping
// whitespace.
func exprTokens(s string) []string {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '\'' || c == '"':
			i++
			for i < len(s) && s[i] != c {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				i++
			}
			i++
			toks = append(toks, `"`)
		case isIdent(s[i : i+1]):
			j := i + 1
			for j < len(s) && (isIdent(s[j:j+1]) || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		default:
			toks = append(toks, s[i:i+1])
			i++
		}
	}
	return toks
}
