package toolcall

import "testing"

func TestMistral(t *testing.T) {
	runCases(t, FormatMistral, []parseCase{
		{name: "content", in: "The weather is fine [really].", want: result{Content: "The weather is fine [really]."}},
		{name: "reasoning and content", in: "[THINK]Hmm, weather.[/THINK]It is sunny.", want: result{Reasoning: "Hmm, weather.", Content: "It is sunny."}},
		{name: "raw reasoning", opts: Options{RawReasoning: true}, in: "[THINK]x[/THINK]y", want: result{Content: "[THINK]x[/THINK]y"}},
		{name: "nemo array", in: `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcDEF123"}]`,
			want: result{Calls: calls("get_weather", `{"city": "Paris"}`)}},
		{name: "nemo parallel", in: `[TOOL_CALLS][{"name": "a", "arguments": {}, "id": "abcDEF123"}, {"name": "b", "arguments": {"s": "[TOOL_CALLS]"}, "id": "abcDEF124"}]`,
			want: result{Calls: calls("a", "{}", "b", `{"s": "[TOOL_CALLS]"}`)}},
		{name: "devstral one call", in: `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}`, want: result{Calls: calls("get_weather", `{"city": "Paris"}`)}},
		{name: "devstral parallel", in: `I'll check both.[TOOL_CALLS]a[ARGS]{"x": {"y": [1, "]}"]}}[TOOL_CALLS]b.c-d[ARGS]{}`,
			want: result{Content: "I'll check both.", Calls: calls("a", `{"x": {"y": [1, "]}"]}}`, "b.c-d", "{}")}},
		{name: "small 3.2 call id", in: "[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{\"city\": \"K\u00f8benhavn \u2603\"}",
			want: result{Calls: calls("get_weather", `{"city": "K`+"\u00f8benhavn \u2603"+`"}`)}},
		{name: "reasoning then call", in: "[THINK]need tool[/THINK][TOOL_CALLS]f[ARGS]{\"q\": \"\\\"quoted\\\"\"}",
			want: result{Reasoning: "need tool", Calls: calls("f", `{"q": "\"quoted\""}`)}},
		{name: "truncated args", in: `[TOOL_CALLS]f[ARGS]{"q": [1, 2`, want: result{Calls: []call{{ID: "call_0", Name: "f", Args: `{"q": [1, 2`}}, Err: "output ended inside the arguments", Truncated: true}},
		{name: "bad name", in: `[TOOL_CALLS]get weather[ARGS]{}`, want: result{Err: `invalid tool name "get weather"`}},
		{name: "missing args", in: `[TOOL_CALLS]f`, want: result{Err: "output ended inside the tool's name", Truncated: true}},
	})
}

func TestMistralDefaultIDs(t *testing.T) {
	p := NewParser(FormatMistral, Options{})
	evs := p.Push(`[TOOL_CALLS]f[ARGS]{}`)
	if len(evs) == 0 || evs[0].Kind != CallStart || len(evs[0].ID) != 9 || !validName(evs[0].ID) {
		t.Fatalf("events %+v: want a CallStart with a 9-character alphanumeric id", evs)
	}
}
