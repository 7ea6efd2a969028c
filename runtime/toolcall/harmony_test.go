package toolcall

import "testing"

func TestHarmony(t *testing.T) {
	runCases(t, FormatHarmony, []parseCase{
		{name: "final only", in: "<|channel|>final<|message|>Hello!<|return|>", want: result{Content: "Hello!"}},
		{name: "reasoning and content", in: "<|channel|>analysis<|message|>User says hi.<|end|><|start|>assistant<|channel|>final<|message|>Hi \u4e16\u754c<|return|>",
			want: result{Reasoning: "User says hi.", Content: "Hi \u4e16\u754c"}},
		{name: "raw reasoning", opts: Options{RawReasoning: true}, in: "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>y",
			want: result{Content: "xy"}},
		{name: "reasoning then call", in: "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"<|call|>\"}<|call|>",
			want: result{Reasoning: "Need weather.", Calls: calls("get_weather", `{"city": "<|call|>"}`)}},
		{name: "template's header order", in: "<|channel|>analysis<|message|>a<|end|><|start|>assistant to=functions.f<|channel|>commentary json<|message|>{\"x\": {\"y\": [1]}}<|call|>",
			want: result{Reasoning: "a", Calls: calls("f", `{"x": {"y": [1]}}`)}},
		{name: "parallel calls and preamble", in: "<|channel|>commentary<|message|>Checking both.<|end|><|start|>assistant<|channel|>commentary to=functions.a <|constrain|>json<|message|>{}<|call|><|start|>assistant<|channel|>commentary to=functions.b <|constrain|>json<|message|>{\"q\": 1}<|call|>",
			want: result{Content: "Checking both.", Calls: calls("a", "{}", "b", `{"q": 1}`)}},
		{name: "no header is content", in: "Plain text reply.", want: result{Content: "Plain text reply."}},
		{name: "truncated call", in: "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"q\": ",
			want: result{Calls: []call{{ID: "call_0", Name: "f", Args: `{"q": `}}, Err: "output ended inside the arguments", Truncated: true}},
		{name: "cut in a header", in: "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>fin",
			want: result{Reasoning: "x"}},
		{name: "cut in a call's header", in: "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=functions.f <|cons",
			want: result{Reasoning: "x", Err: "output ended inside a call's header", Truncated: true}},
	})
}
