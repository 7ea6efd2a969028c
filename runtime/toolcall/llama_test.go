package toolcall

import "testing"

func TestLlama3(t *testing.T) {
	runCases(t, FormatLlama3, []parseCase{
		{name: "content", in: "The capital is Paris.", want: result{Content: "The capital is Paris."}},
		{name: "json content is content", in: `{"answer": "Paris"}`, want: result{Content: `{"answer": "Paris"}`}},
		{name: "name mid-reply is text", in: `Write {"name": "x", "parameters": {}} to call.`, want: result{Content: `Write {"name": "x", "parameters": {}} to call.`}},
		{name: "one call", in: `{"name": "get_weather", "parameters": {"city": "Paris"}}`, want: result{Calls: calls("get_weather", `{"city": "Paris"}`)}},
		{name: "llama 3.2 type first", in: "\n{\"type\": \"function\", \"name\": \"f\", \"parameters\": {\"q\": \"\\u00e9\\\"}\"}}", want: result{Calls: calls("f", `{"q": "\u00e9\"}"}`)}},
		{name: "two calls", in: `{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": [{"y": null}]}}`, want: result{Calls: calls("a", "{}", "b", `{"x": [{"y": null}]}`)}},
		{name: "python tag json", in: `<|python_tag|>{"name": "f", "parameters": {"n": -1.5e-3}}`, want: result{Calls: calls("f", `{"n": -1.5e-3}`)}},
		{name: "python tag builtin", in: `<|python_tag|>brave_search.call(query="weather in \"Paris\"", count=3, safe=True)`, want: result{Calls: calls("brave_search", `{"query": "weather in \"Paris\"", "count": 3, "safe": true}`)}},
		{name: "python tag code", in: "Let me compute.<|python_tag|>print(1 + 1)\n", want: result{Content: "Let me compute.", Calls: calls("python", `{"code": "print(1 + 1)"}`)}},
		{name: "truncated", in: `{"name": "f", "parameters": {"city": "Par`, want: result{Calls: []call{{ID: "call_0", Name: "f", Args: `{"city": "Par`}}, Err: "output ended inside the call", Truncated: true}},
		{name: "markers in arguments", in: "{\"name\": \"f\", \"parameters\": {\"s\": \"<|python_tag|>{\\\"name\\\": \\\"g\\\"} \u4e16\"}}",
			want: result{Calls: calls("f", "{\"s\": \"<|python_tag|>{\\\"name\\\": \\\"g\\\"} \u4e16\"}")}},
	})
}
