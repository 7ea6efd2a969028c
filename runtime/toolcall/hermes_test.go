package toolcall

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHermes(t *testing.T) {
	weather := `{"location": "Paris", "unit": "celsius"}`
	runCases(t, FormatHermes, []parseCase{
		{name: "content", in: "Hello there.\nHow are you?", want: result{Content: "Hello there.\nHow are you?"}},
		{name: "reasoning and content", in: "<think>\nThe user greets.\n</think>\n\nHello!", want: result{Reasoning: "The user greets.", Content: "Hello!"}},
		{name: "prompt opened reasoning", opts: Options{InReasoning: true}, in: "\nhmm\n</think>\n\nHi", want: result{Reasoning: "hmm", Content: "Hi"}},
		{name: "raw reasoning", opts: Options{RawReasoning: true}, in: "<think>\nhmm\n</think>\n\nHi", want: result{Content: "<think>\nhmm\n</think>\n\nHi"}},
		{name: "one call", in: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + weather + "}\n</tool_call>",
			want: result{Calls: calls("get_weather", weather)}},
		{name: "content then call", in: "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + weather + "}\n</tool_call>",
			want: result{Content: "Let me check.", Calls: calls("get_weather", weather)}},
		{name: "parallel calls", in: "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1, 2.5e3, -0, true, null]}}\n</tool_call>",
			want: result{Calls: calls("a", "{}", "b", `{"x": [1, 2.5e3, -0, true, null]}`)}},
		{name: "reasoning then call", in: "<think>\nNeed weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + weather + "}\n</tool_call>",
			want: result{Reasoning: "Need weather.", Calls: calls("get_weather", weather)}},
		{name: "nested and tricky strings",
			in:   "<tool_call>\n{\"name\": \"run\", \"arguments\": {\"code\": \"print(\\\"</tool_call>\\\")\\n<tool_call>\", \"nest\": {\"a\": [{\"b\": \"}]\"}]}, \"u\": \"h\u00e9llo \u4e16\u754c \\u00e9 \U0001F600\"}}\n</tool_call>",
			want: result{Calls: calls("run", "{\"code\": \"print(\\\"</tool_call>\\\")\\n<tool_call>\", \"nest\": {\"a\": [{\"b\": \"}]\"}]}, \"u\": \"h\u00e9llo \u4e16\u754c \\u00e9 \U0001F600\"}")}},
		{name: "arguments before name", in: "<tool_call>\n{\"arguments\": {\"q\": 1}, \"name\": \"f\"}\n</tool_call>", want: result{Calls: calls("f", `{"q": 1}`)}},
		{name: "arguments as a string", in: "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"q\\\": 1}\"}\n</tool_call>", want: result{Calls: calls("f", `{"q": 1}`)}},
		{name: "marker mid-line is text", in: "Use the <tool_call> tag like this.", want: result{Content: "Use the <tool_call> tag like this."}},
		{name: "marker in a code fence is text", in: "Example:\n```\n<tool_call>\n{\"name\": \"f\"}\n</tool_call>\n```\nDone.",
			want: result{Content: "Example:\n```\n<tool_call>\n{\"name\": \"f\"}\n</tool_call>\n```\nDone."}},
		{name: "think mid-reply is text", in: "I <think> so.\n<think>x</think>", want: result{Content: "I <think> so.\n<think>x</think>"}},
		{name: "unicode content", in: "h\u00e9llo \U0001F600 \u4e16\u754c", want: result{Content: "h\u00e9llo \U0001F600 \u4e16\u754c"}},
		{name: "truncated call", in: "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"abc",
			want: result{Calls: []call{{ID: "call_0", Name: "f", Args: `{"q": "abc`}}, Err: "output ended inside the call", Truncated: true}},
		{name: "malformed call", in: "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": abc}}\n</tool_call>",
			want: result{Calls: []call{{ID: "call_0", Name: "f", Args: `{"q": `}}, Err: "malformed JSON"}},
		{name: "missing close at end is forgiven", in: "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n", want: result{Calls: calls("f", "{}")}},
		{name: "text after a call", in: "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n\nDone.", want: result{Calls: calls("f", "{}"), Content: "Done."}},
		{name: "call without name", in: "<tool_call>\n{\"arguments\": {}}\n</tool_call>", want: result{Err: "the call has no name"}},
	})
}

func TestReasoningMode(t *testing.T) {
	p := NewParser(FormatHermes, Options{})
	var got []bool
	for _, s := range []string{"<think>", "\nplan", "</think>", "\n\nHi", "\n<tool_call>", "\n{\"name\": \"f\"", "}\n</tool_call>"} {
		p.Push(s)
		got = append(got, p.Reasoning())
	}
	want := []bool{true, true, false, false, false, false, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Reasoning() after each piece (-want +got)\n%s", diff)
	}
}
