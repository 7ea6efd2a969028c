package toolcall

import "testing"

func TestDeepSeek(t *testing.T) {
	r1 := "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"tz\": \"<｜tool▁call▁end｜>\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
	v31 := "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"tz\": \"<｜tool▁call▁end｜>\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
	two := calls("get_weather", `{"city": "Paris"}`, "get_time", `{"tz": "<｜tool▁call▁end｜>"}`)
	runCases(t, FormatDeepSeek, []parseCase{
		{name: "content", in: "Hello \u4e16\u754c", want: result{Content: "Hello \u4e16\u754c"}},
		{name: "r1 reasoning opened by the prompt", opts: Options{InReasoning: true}, in: "Let me think.\n</think>\n\nAnswer: 4", want: result{Reasoning: "Let me think.", Content: "Answer: 4"}},
		{name: "reasoning in the reply", in: "<think>\nok\n</think>\n\nHi", want: result{Reasoning: "ok", Content: "Hi"}},
		{name: "r1 parallel calls", in: r1, want: result{Calls: two}},
		{name: "v3.1 parallel calls", in: v31, want: result{Calls: two}},
		{name: "reasoning, content, call", opts: Options{InReasoning: true}, in: "plan</think>I'll look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": {\"b\": [\"\\\"\"]}}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
			want: result{Reasoning: "plan", Content: "I'll look.", Calls: calls("f", `{"a": {"b": ["\""]}}`)}},
		{name: "stops at the end token's place", in: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>", want: result{Calls: calls("f", "{}")}},
		{name: "truncated", in: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": tr",
			want: result{Calls: []call{{ID: "call_0", Name: "f", Args: `{"a": tr`}}, Err: "output ended inside the arguments", Truncated: true}},
		{name: "malformed", in: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\" 1}<｜tool▁call▁end｜>",
			want: result{Calls: []call{{ID: "call_0", Name: "f", Args: `{"a" `}}, Err: "malformed JSON in the arguments"}},
		{name: "unicode arguments", in: "<｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"q\": \"\u00e9\u4e16 \U0001F600 <｜tool▁sep｜>\"}<｜tool▁call▁end｜>",
			want: result{Calls: calls("f", "{\"q\": \"\u00e9\u4e16 \U0001F600 <｜tool▁sep｜>\"}")}},
	})
}
