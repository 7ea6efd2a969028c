package chat

import (
	"fmt"
	"strings"
)

// What the engine (github.com/ardanlabs/jinja v1.8.0) implements, plus what
// this package adds. checkSupported refuses, at Compile, a template that uses
// anything else, naming it and its line: the engine would only fail when a
// render reaches it (an unknown filter or test), or silently (a method it
// does not know is undefined, and so is its result when called through
// | default or a test).
var (
	supportedFilters = setOf("abs", "batch", "capitalize", "count", "d", "default", "dictsort", "e", "escape",
		"first", "float", "from_json", "fromjson", "indent", "int", "items", "join", "last", "length", "list",
		"lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select",
		"selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper", "wordcount")
	supportedTests = setOf("defined", "undefined", "none", "boolean", "integer", "float", "number", "string",
		"mapping", "iterable", "sequence", "callable", "true", "false", "eq", "equalto", "ne", "gt",
		"greaterthan", "ge", "lt", "lessthan", "le", "in", "odd", "even", "upper", "lower", "sameas")
	// Methods of strings, lists and dicts. append, insert and pop are
	// refused by checkCycles instead (they mutate).
	supportedMethods = setOf("strip", "lstrip", "rstrip", "split", "startswith", "endswith", "replace",
		"upper", "lower", "title", "capitalize", "count", "find", "format",
		"items", "keys", "values", "get", "update", "append", "insert", "pop",
		"cycle") // loop.cycle
	// Functions a template may call by name, besides its own macros and
	// variables it binds.
	supportedGlobals = setOf("namespace", "range", "dict", "joiner", "cycler", "raise_exception",
		"strftime_now", "caller", stepFunc)
	// Jinja keywords that may precede "(" in an expression.
	exprKeywords = setOf("if", "elif", "else", "and", "or", "not", "in", "is", "for", "set", "return", "macro", "call", "filter", "with")
)

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// checkSupported returns an error naming the first filter, test, method or
// function call in source that the engine lacks, and its line. Names a
// template binds itself (macros, {% set %}, loop variables, macro
// parameters) may be called.
func checkSupported(source string) error {
	tags := lexTags(source)
	bound := map[string]bool{}
	for _, lt := range tags {
		toks := lt.toks
		if len(toks) > 1 && toks[0] == "macro" {
			bound[toks[1]] = true
			for _, p := range macroParams(toks) {
				bound[p] = true
			}
		}
		for _, n := range bindings(toks) {
			bound[n] = true
		}
	}
	for _, lt := range tags {
		toks := lt.toks
		if len(toks) > 1 && toks[0] == "filter" && isIdent(toks[1]) && !supportedFilters[toks[1]] {
			return fmt.Errorf("line %d: filter %q is not supported ({%% filter %s %%})", lt.line, toks[1], toks[1])
		}
		for j, tk := range toks {
			if !isIdent(tk) || j == 0 {
				continue
			}
			prev := toks[j-1]
			switch {
			case prev == "|":
				if !supportedFilters[tk] {
					return fmt.Errorf("line %d: filter %q is not supported (| %s)", lt.line, tk, tk)
				}
			case prev == "is" || (prev == "not" && j >= 2 && toks[j-2] == "is"):
				if tk != "not" && !supportedTests[tk] {
					return fmt.Errorf("line %d: test %q is not supported (is %s)", lt.line, tk, tk)
				}
			case prev == "." && j+1 < len(toks) && toks[j+1] == "(":
				if !supportedMethods[tk] {
					return fmt.Errorf("line %d: method .%s() is not supported", lt.line, tk)
				}
			}
		}
		for j := 0; j+1 < len(toks); j++ {
			tk := toks[j]
			if toks[j+1] != "(" || !isIdent(tk) || exprKeywords[tk] || (j > 0 && (toks[j-1] == "." || toks[j-1] == "|" || toks[j-1] == "is")) {
				continue
			}
			if j >= 2 && toks[j-1] == "not" && toks[j-2] == "is" {
				continue
			}
			if j == 1 && (toks[0] == "macro" || toks[0] == "call") {
				continue
			}
			if !supportedGlobals[tk] && !bound[tk] {
				return fmt.Errorf("line %d: function %s() is not supported", lt.line, tk)
			}
		}
	}
	return nil
}

// rewriteFilters renames every "| tojson" filter in the tags of source to
// tojsonFilter (Hugging Face's tojson, pyTojson), leaving string literals,
// comments and {% raw %} blocks alone.
func rewriteFilters(source string) string {
	var b strings.Builder
	b.Grow(len(source) + 64)
	last, inRaw := 0, false
	for i := 0; ; {
		t, ok := nextTag(source, i)
		if !ok {
			break
		}
		i = t.next
		if t.closer == "#}" {
			continue
		}
		if t.closer == "%}" {
			switch w := firstWord(source[t.start:t.end]); {
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
		for _, at := range filterNameAt(source, t.start, t.end, "tojson") {
			b.WriteString(source[last:at])
			b.WriteString(tojsonFilter)
			last = at + len("tojson")
		}
	}
	b.WriteString(source[last:])
	return b.String()
}

// filterNameAt returns the offsets in s[start:end] (a tag's content) where a
// filter called name is applied: "|", optional white space, then name not
// followed by an identifier character, outside string literals.
func filterNameAt(s string, start, end int, name string) []int {
	var at []int
	for i := start; i < end; i++ {
		switch c := s[i]; c {
		case '\'', '"':
			i++
			for i < end && s[i] != c {
				if s[i] == '\\' {
					i++
				}
				i++
			}
		case '|':
			j := i + 1
			for j < end && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
				j++
			}
			k := j + len(name)
			if k <= end && s[j:k] == name && (k == end || !isIdentByte(s[k])) {
				at = append(at, j)
			}
		}
	}
	return at
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
