package toolcall

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The grammar side: what text a format writes around each call's
// arguments, for the constrained decoder (runtime/constrain) to enforce
// tool_choice. The parser above reads whatever a model writes; the
// grammar makes the model write one canonical form of it, which the parser
// reads back (tested).

// Syntax is the text of a reply that calls tools in one format: Open, then
// calls separated by Between, then Close; each call is its tool's Prefix,
// the arguments (a JSON object matching Schema), and Suffix.
type Syntax struct {
	// Trigger is the text whose appearance in free text starts the calls
	// (for tool_choice auto: generation runs free until it, then is
	// constrained to the rest of the calls). It is Open, or the start of
	// every Prefix when Open is empty.
	Trigger string
	Open    string
	Between string
	Close   string
	Tools   []ToolSyntax
}

// ToolSyntax is how one tool's call is written.
type ToolSyntax struct {
	Name   string
	Prefix string
	Schema json.RawMessage // the tool's parameters; empty means any object
	Suffix string
}

// ErrNoSyntax: the format writes arguments as text, not JSON, so a call is
// not prefix + JSON + suffix (Qwen3-Coder, DeepSeek DSML); their grammars
// need a rule per parameter and are not written yet.
var ErrNoSyntax = errors.New("toolcall: no prefix/JSON/suffix call syntax for this format")

// CallSyntax returns how format f writes calls to tools.
func CallSyntax(f Format, tools []Tool) (Syntax, error) {
	var s Syntax
	if len(tools) == 0 {
		return s, errors.New("toolcall: no tools")
	}
	for _, t := range tools {
		if !validName(t.Name) {
			return s, fmt.Errorf("toolcall: invalid tool name %q", t.Name)
		}
		if len(t.Parameters) > 0 && !json.Valid(t.Parameters) {
			return s, fmt.Errorf("toolcall: tool %s: parameters are not JSON", t.Name)
		}
	}
	var prefix, suffix func(name string) string
	switch f {
	case FormatHermes:
		s.Trigger, s.Between = hermesOpen, "\n"
		prefix = func(n string) string { return hermesOpen + "\n{\"name\": \"" + n + "\", \"arguments\": " }
		suffix = func(string) string { return "}\n" + hermesClose }
	case FormatLlama3:
		s.Trigger, s.Between = `{"name": "`, "; "
		prefix = func(n string) string { return `{"name": "` + n + `", "parameters": ` }
		suffix = func(string) string { return "}" }
	case FormatMistral:
		s.Trigger = mistralCalls
		prefix = func(n string) string { return mistralCalls + n + mistralArgs }
		suffix = func(string) string { return "" }
	case FormatHarmony:
		// The reply starts right after <|start|>assistant; later calls
		// start a new message.
		s.Trigger, s.Between = hChannel+"commentary to=functions.", hStart+"assistant"
		prefix = func(n string) string {
			return hChannel + "commentary to=functions." + n + " <|constrain|>json" + hMessage
		}
		suffix = func(string) string { return hCall }
	case FormatDeepSeek:
		// R1's form (its distills' too); V3.1's compact form parses alike.
		s.Trigger, s.Open, s.Between, s.Close = dsCallsBegin, dsCallsBegin, "\n", dsCallsEnd
		prefix = func(n string) string { return dsCallBegin + "function" + dsSep + n + "\n```json\n" }
		suffix = func(string) string { return "\n```" + dsCallEnd }
	case FormatGeneric:
		s.Trigger, s.Open, s.Between, s.Close = `{"tool_calls": [`, `{"tool_calls": [`, ", ", "]}"
		prefix = func(n string) string { return `{"name": "` + n + `", "arguments": ` }
		suffix = func(string) string { return "}" }
	default:
		return s, fmt.Errorf("%w: %v", ErrNoSyntax, f)
	}
	for _, t := range tools {
		s.Tools = append(s.Tools, ToolSyntax{Name: t.Name, Prefix: prefix(t.Name), Schema: t.Parameters, Suffix: suffix(t.Name)})
	}
	return s, nil
}

// GBNF writes the syntax as a GBNF grammar (runtime/constrain's dialect)
// whose root is the whole call text: one call, or with parallel one or
// more. Each tool's arguments are rule "args-<i>" (i its index in
// s.Tools); argsRule returns the GBNF rules that define it, or nil for the
// grammar's own rule of any JSON object. (constrain compiles JSON Schemas
// to its automaton directly, not to GBNF: enforcing the schemas inside
// this grammar needs constrain to splice a compiled schema in at a rule,
// which is the next step; until then argsRule may give a hand-written
// rule.)
func (s Syntax) GBNF(parallel bool, argsRule func(i int, t ToolSyntax) string) string {
	var b strings.Builder
	b.WriteString("root ::= " + gbnfLit(s.Open) + " call")
	if parallel {
		b.WriteString(" (" + gbnfLit(s.Between) + " call)*")
	}
	b.WriteString(" " + gbnfLit(s.Close) + "\n")
	b.WriteString("call ::= ")
	for i := range s.Tools {
		if i > 0 {
			b.WriteString(" | ")
		}
		fmt.Fprintf(&b, "call-%d", i)
	}
	b.WriteString("\n")
	for i, t := range s.Tools {
		fmt.Fprintf(&b, "call-%d ::= %s args-%d %s\n", i, gbnfLit(t.Prefix), i, gbnfLit(t.Suffix))
		rule := ""
		if argsRule != nil {
			rule = argsRule(i, t)
		}
		if rule == "" {
			rule = fmt.Sprintf("args-%d ::= json-object\n", i)
		}
		b.WriteString(rule)
	}
	b.WriteString(jsonGBNF)
	return b.String()
}

// jsonGBNF is any JSON object, written compactly or with single spaces
// after ':' and ',' as the templates write it.
const jsonGBNF = `json-object ::= "{" ( json-member ( "," " "? json-member )* )? "}"
json-member ::= json-string ":" " "? json-value
json-array ::= "[" ( json-value ( "," " "? json-value )* )? "]"
json-value ::= json-object | json-array | json-string | json-number | "true" | "false" | "null"
json-string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
json-number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?
`

// gbnfLit writes s as a GBNF string literal ("" for nothing).
func gbnfLit(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			b.WriteString(`\x` + strconv.FormatInt(int64(r)|0x100, 16)[1:])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
