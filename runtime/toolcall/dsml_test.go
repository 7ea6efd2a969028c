package toolcall

import "testing"

func TestDeepSeekDSML(t *testing.T) {
	block := "\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris \"Nord\"\n</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"search\">\n<｜DSML｜parameter name=\"filters\" string=\"false\">{\"tags\": [\"a\", \"</｜DSML｜invoke>\"]}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"
	want := calls("get_weather", `{"city": "Paris \"Nord\"\n", "days": 3}`, "search", `{"filters": {"tags": ["a", "</｜DSML｜invoke>"]}}`)
	runCases(t, FormatDeepSeekDSML, []parseCase{
		{name: "content", in: "Just text <not a tag>.", want: result{Content: "Just text <not a tag>."}},
		{name: "reasoning opened by the prompt", opts: Options{InReasoning: true}, in: "hmm</think>Answer", want: result{Reasoning: "hmm", Content: "Answer"}},
		{name: "content and parallel calls", in: "Checking." + block, want: result{Content: "Checking.", Calls: want}},
		{name: "v4 block", in: "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>", want: result{Calls: calls("f", "{}")}},
		{name: "truncated", in: "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"q\" string=\"true\">abc",
			want: result{Calls: []call{{ID: "call_0", Name: "f", Args: `{"q": "abc`}}, Err: "output ended inside a parameter", Truncated: true}},
		{name: "reasoning then call with unicode", in: "<think>plan \u4e16</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"q\" string=\"true\">caf\u00e9 \U0001F600 \\ \"x\"</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
			want: result{Reasoning: "plan \u4e16", Calls: calls("f", "{\"q\": \"caf\u00e9 \U0001F600 \\\\ \\\"x\\\"\"}")}},
	})
}
