package toolcall

import (
	"encoding/json"
	"strings"
	"testing"
)

// benchReply is a long reply of each format: reasoning, content, and two
// calls with sizeable arguments.
func benchReply(f Format) string {
	reasoning := strings.Repeat("The user wants the weather, so I should call the tool. ", 20)
	content := strings.Repeat("Here is some text with `code` and <tags> in it.\n", 20)
	args := `{"city": "Paris", "query": "` + strings.Repeat("lorem ipsum dolor sit amet ", 20) + `", "n": [1, 2, 3]}`
	value := strings.Repeat("lorem ipsum dolor sit amet ", 20)
	switch f {
	case FormatHermes:
		c := "<tool_call>\n{\"name\": \"search\", \"arguments\": " + args + "}\n</tool_call>"
		return "<think>\n" + reasoning + "\n</think>\n\n" + content + c + "\n" + c
	case FormatQwen3Coder:
		c := "<tool_call>\n<function=search>\n<parameter=city>\nParis\n</parameter>\n<parameter=query>\n" + value + "\n</parameter>\n<parameter=n>\n[1, 2, 3]\n</parameter>\n</function>\n</tool_call>"
		return "<think>\n" + reasoning + "\n</think>\n\n" + content + c + "\n" + c
	case FormatLlama3:
		return `{"name": "search", "parameters": ` + args + `}; {"name": "search", "parameters": ` + args + `}`
	case FormatMistral:
		return "[THINK]" + reasoning + "[/THINK]" + content + "[TOOL_CALLS]search[ARGS]" + args + "[TOOL_CALLS]search[ARGS]" + args
	case FormatHarmony:
		c := "<|start|>assistant<|channel|>commentary to=functions.search <|constrain|>json<|message|>" + args + "<|call|>"
		return "<|channel|>analysis<|message|>" + reasoning + "<|end|><|start|>assistant<|channel|>commentary<|message|>" + content + "<|end|>" + c + c
	case FormatDeepSeek:
		c := "<｜tool▁call▁begin｜>search<｜tool▁sep｜>" + args + "<｜tool▁call▁end｜>"
		return "<think>" + reasoning + "</think>" + content + "<｜tool▁calls▁begin｜>" + c + c + "<｜tool▁calls▁end｜>"
	case FormatDeepSeekDSML:
		c := "<｜DSML｜invoke name=\"search\">\n<｜DSML｜parameter name=\"query\" string=\"true\">" + value + "</｜DSML｜parameter>\n<｜DSML｜parameter name=\"n\" string=\"false\">[1, 2, 3]</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
		return "<think>" + reasoning + "</think>" + content + "\n\n<｜DSML｜function_calls>\n" + c + c + "</｜DSML｜function_calls>"
	}
	return "<think>" + reasoning + "</think>" + `{"tool_calls": [{"name": "search", "arguments": ` + args + `}, {"name": "search", "arguments": ` + args + `}]}`
}

// tokenize cuts s into pieces of about a token's size (4 bytes).
func tokenize(s string) []string {
	var out []string
	for len(s) > 4 {
		out = append(out, s[:4])
		s = s[4:]
	}
	return append(out, s)
}

// BenchmarkParser measures the parser's cost per token (4-byte pieces) on
// a reply of each format with reasoning, content and two calls.
func BenchmarkParser(b *testing.B) {
	tools := []Tool{{Name: "search", Parameters: json.RawMessage(`{"properties": {"city": {"type": "string"}, "query": {"type": "string"}, "n": {"type": "array"}}}`)}}
	for _, f := range Formats() {
		b.Run(f.String(), func(b *testing.B) {
			toks := tokenize(benchReply(f))
			ids := func() string { return "call_x" }
			b.ReportAllocs()
			for b.Loop() {
				p := NewParser(f, Options{Tools: tools, NewID: ids})
				for _, tok := range toks {
					p.Push(tok)
				}
				if _, err := p.Finish(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(toks)), "ns/token")
		})
	}
}

// BenchmarkAdversarial feeds degenerate outputs (long runs of whitespace,
// of marker starts, huge values) in 4-byte pieces: the cost per byte must
// stay flat as they grow, not grow with the run.
func BenchmarkAdversarial(b *testing.B) {
	const n = 20000
	inputs := []struct{ name, text string }{
		{"spaces", strings.Repeat(" ", n)},
		{"newlines", strings.Repeat("\n", n)},
		{"braces", strings.Repeat("{", n)},
		{"lt", strings.Repeat("<", n)},
		{"fences", strings.Repeat("```\n", n/4)},
		{"brackets", strings.Repeat("[", n)},
		{"pipes", strings.Repeat("<|", n/2)},
		{"think-spaces", "<think>" + strings.Repeat(" ", n)},
		{"long-string", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"" + strings.Repeat("x", n) + "\"}}"},
		{"python", "<|python_tag|>" + strings.Repeat("x", n)},
		{"param-newlines", "<tool_call>\n<function=f>\n<parameter=a>\n" + strings.Repeat("\n", n)},
	}
	for _, in := range inputs {
		toks := tokenize(in.text)
		for _, f := range Formats() {
			b.Run(in.name+"/"+f.String(), func(b *testing.B) {
				for b.Loop() {
					p := NewParser(f, Options{})
					for _, tok := range toks {
						p.Push(tok)
					}
					p.Finish()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(in.text)), "ns/byte")
			})
		}
	}
}
