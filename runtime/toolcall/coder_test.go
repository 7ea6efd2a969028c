package toolcall

import (
	"encoding/json"
	"testing"
)

func TestQwen3Coder(t *testing.T) {
	tools := []Tool{
		{Name: "write_file", Parameters: json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}, "mode": {"type": ["integer", "null"]}, "opts": {"type": "object"}, "force": {"type": "boolean"}}}`)},
		{Name: "get_weather", Parameters: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}}}`)},
	}
	opts := Options{Tools: tools}
	one := "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
	runCases(t, FormatQwen3Coder, []parseCase{
		{name: "content", in: "Plain answer.", opts: opts, want: result{Content: "Plain answer."}},
		{name: "one call", in: one, opts: opts, want: result{Calls: calls("get_weather", `{"city": "Paris"}`)}},
		{name: "content then parallel calls", opts: opts,
			in: "I'll write it.\n" + one + "\n<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/a \"b\".go\n</parameter>\n<parameter=content>\nfunc main() {\n\tprintln(\"<parameter=x>\")\n}\n\n</parameter>\n<parameter=mode>\n420\n</parameter>\n<parameter=opts>\n{\"a\": [1, {\"b\": null}]}\n</parameter>\n<parameter=force>\ntrue\n</parameter>\n</function>\n</tool_call>",
			want: result{Content: "I'll write it.", Calls: calls("get_weather", `{"city": "Paris"}`,
				"write_file", `{"path": "/tmp/a \"b\".go", "content": "func main() {\n\tprintln(\"<parameter=x>\")\n}\n", "mode": 420, "opts": {"a": [1, {"b": null}]}, "force": true}`)},
		},
		{name: "reasoning opened by the prompt, then a call", opts: Options{Tools: tools, InReasoning: true},
			in:   "Need the weather.\n</think>\n\n" + one,
			want: result{Reasoning: "Need the weather.", Calls: calls("get_weather", `{"city": "Paris"}`)}},
		{name: "unknown tool and parameters infer", in: "<tool_call>\n<function=f>\n<parameter=n>\n3.5\n</parameter>\n<parameter=s>\nhello \u4e16\u754c\n</parameter>\n</function>\n</tool_call>",
			want: result{Calls: calls("f", `{"n": 3.5, "s": "hello `+"\u4e16\u754c"+`"}`)}},
		{name: "no parameters", in: "<tool_call>\n<function=now>\n</function>\n</tool_call>", want: result{Calls: calls("now", "{}")}},
		{name: "non-JSON for a typed parameter becomes a string", opts: opts, in: "<tool_call>\n<function=write_file>\n<parameter=mode>\nrw-r\n</parameter>\n</function>\n</tool_call>",
			want: result{Calls: calls("write_file", `{"mode": "rw-r"}`)}},
		{name: "marker in a fence is text", opts: opts, in: "Like so:\n```\n" + one + "\n```", want: result{Content: "Like so:\n```\n" + one + "\n```"}},
		{name: "truncated", opts: opts, in: "<tool_call>\n<function=write_file>\n<parameter=content>\nabc\ndef",
			want: result{Calls: []call{{ID: "call_0", Name: "write_file", Args: `{"content": "abc\ndef`}}, Err: "output ended inside a parameter", Truncated: true}},
	})
}
