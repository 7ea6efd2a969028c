package toolcall

import "testing"

func TestGeneric(t *testing.T) {
	runCases(t, FormatGeneric, []parseCase{
		{name: "content", in: "Paris is sunny.", want: result{Content: "Paris is sunny."}},
		{name: "json content is content", in: `{"answer": 42}`, want: result{Content: `{"answer": 42}`}},
		{name: "reasoning and content", in: "<think>x</think>\nHi", want: result{Reasoning: "x", Content: "Hi"}},
		{name: "one call", in: `{"tool_calls": [{"name": "f", "arguments": {"a": "b"}}]}`, want: result{Calls: calls("f", `{"a": "b"}`)}},
		{name: "parallel calls after reasoning", in: "<think>plan</think>\n {\n  \"tool_calls\" : [{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {\"s\": \"]}\\\"\"}}]\n}\n",
			want: result{Reasoning: "plan", Calls: calls("f", "{}", "g", `{"s": "]}\""}`)}},
		{name: "truncated", in: `{"tool_calls": [{"name": "f", "arguments": {"a": `, want: result{Calls: []call{{ID: "call_0", Name: "f", Args: `{"a": `}}, Err: "output ended inside the call", Truncated: true}},
		{name: "not closed", in: `{"tool_calls": [{"name": "f", "arguments": {}}] oops`, want: result{Calls: calls("f", "{}"), Err: "expected '}' closing the reply"}},
		{name: "unicode and markers in arguments", in: "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"s\": \"\u4e16\u754c \\\"{\\\"tool_calls\\\": [\\\" <think>\"}}]}",
			want: result{Calls: calls("f", "{\"s\": \"\u4e16\u754c \\\"{\\\"tool_calls\\\": [\\\" <think>\"}")}},
	})
}
