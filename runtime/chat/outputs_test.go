package chat

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The expected texts below were derived by reading each template (Hugging
// Face semantics: trim_blocks, lstrip_blocks, Python's json.dumps for
// tojson), not by running this package.
var (
	basicConv = []Message{{Role: "system", Content: "You are helpful."}, {Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello!"}}
	multiConv = []Message{{Role: "system", Content: "Sys"}, {Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello!"}, {Role: "user", Content: "How are you?"}}
	// toolConv: a question, a call of get_weather and its result.
	toolConv = []Message{{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "call0001x", Name: "get_weather", Arguments: `{"city": "Paris"}`}}},
		{Role: "tool", Content: "22C", ToolCallID: "call0001x", Name: "get_weather"}}
	// weatherToolJSON is weatherTool as Python's json.dumps writes it.
	weatherToolJSON = `{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"}}, "required": ["city"]}}}`
	// weatherToolIndent4 is json.dumps(weatherTool, indent=4).
	weatherToolIndent4 = "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        \"description\": \"Get the current weather in a city\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {\n                \"city\": {\n                    \"type\": \"string\",\n                    \"description\": \"The city\"\n                }\n            },\n            \"required\": [\n                \"city\"\n            ]\n        }\n    }\n}"
)

func boolPtr(b bool) *bool { return &b }

// TestSharedTemplateOutputs checks the exact text the important families'
// templates produce.
func TestSharedTemplateOutputs(t *testing.T) {
	tools := []json.RawMessage{weatherTool}
	const (
		llamaBOS = "<|begin_of_text|>"
		dsBOS    = "<｜begin▁of▁sentence｜>"
	)
	llama31Basic := llamaBOS + "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are helpful.<|eot_id|>" +
		"<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
	gptOSSSystem := "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: 2026-03-05\n\n"
	for _, tc := range []struct {
		name, file string
		bos, eos   string
		msgs       []Message
		gen        bool
		vars       Vars
		want       string
	}{
		// Qwen3: the last assistant turn after the last user query gets an
		// empty think block; earlier ones do not.
		{"qwen3 basic", "Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>", basicConv, false, Vars{},
			"<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n"},
		{"qwen3 multi no thinking", "Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>", multiConv, true, Vars{EnableThinking: boolPtr(false)},
			"<|im_start|>system\nSys<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"qwen3 multi thinking", "Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>", multiConv, true, Vars{EnableThinking: boolPtr(true)},
			"<|im_start|>system\nSys<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n"},
		{"qwen3 tools", "Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>", append([]Message{{Role: "system", Content: "Sys"}}, toolConv...), true, Vars{Tools: tools},
			"<|im_start|>system\nSys\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
				weatherToolJSON + "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\nWeather in Paris?<|im_end|>\n" +
				"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\n22C\n</tool_response><|im_end|>\n<|im_start|>assistant\n"},

		// Llama 3.1 and 3.3 (the same template): fixed default date.
		{"llama3.1 basic", "meta-llama-Llama-3.1-8B-Instruct.jinja", llamaBOS, "<|eot_id|>", basicConv, false, Vars{}, llama31Basic},
		{"llama3.3 basic", "meta-llama-Llama-3.3-70B-Instruct.jinja", llamaBOS, "<|eot_id|>", basicConv, false, Vars{}, llama31Basic},
		{"llama3.1 multi date", "meta-llama-Llama-3.1-8B-Instruct.jinja", llamaBOS, "<|eot_id|>", multiConv, true, Vars{DateString: "05 Mar 2026"},
			llamaBOS + "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 05 Mar 2026\n\nSys<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		// Llama 3.2: the date comes from strftime_now("%d %b %Y").
		{"llama3.2 basic", "meta-llama-Llama-3.2-3B-Instruct.jinja", llamaBOS, "<|eot_id|>", basicConv, false, Vars{Now: fixedNow},
			llamaBOS + "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 05 Mar 2026\n\nYou are helpful.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"},
		// Llama 3.2 tools: definitions (json.dumps indent=4) in the first
		// user message; a tool result is a string, which Jinja counts as
		// iterable, so it goes through tojson (quoted).
		{"llama3.2 tools", "meta-llama-Llama-3.2-3B-Instruct.jinja", llamaBOS, "<|eot_id|>", toolConv, true, Vars{Tools: tools, Now: fixedNow},
			llamaBOS + "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 05 Mar 2026\n\n<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n" +
				"Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n" +
				weatherToolIndent4 + "\n\nWeather in Paris?<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>" +
				"<|start_header_id|>ipython<|end_header_id|>\n\n\"22C\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},

		// Mistral Nemo: the system message joins the last user message.
		{"mistral-nemo multi", "mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>", multiConv, true, Vars{},
			"<s>[INST]Hi[/INST]Hello!</s>[INST]Sys\n\nHow are you?[/INST]"},
		{"mistral-nemo tools", "mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>", toolConv, true, Vars{Tools: tools},
			"<s>[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the current weather in a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"The city\"}}, \"required\": [\"city\"]}}}][/AVAILABLE_TOOLS]" +
				"[INST]Weather in Paris?[/INST]" +
				"[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"call0001x\"}]</s>" +
				"[TOOL_RESULTS]{\"content\": 22C, \"call_id\": \"call0001x\"}[/TOOL_RESULTS]"},

		// Mistral Small 3.2: system prompt block; tool calls as
		// [TOOL_CALLS]name[CALL_ID]id[ARGS]json.
		{"mistral-small-3.2 multi", "Mistral-Small-3.2-24B-Instruct-2506.jinja", "<s>", "</s>", multiConv, true, Vars{},
			"<s>[SYSTEM_PROMPT]Sys[/SYSTEM_PROMPT][INST]Hi[/INST]Hello!</s>[INST]How are you?[/INST]"},
		{"mistral-small-3.2 tools", "Mistral-Small-3.2-24B-Instruct-2506.jinja", "<s>", "</s>", append([]Message{{Role: "system", Content: "Sys"}}, toolConv...), true, Vars{Tools: tools},
			"<s>[SYSTEM_PROMPT]Sys[/SYSTEM_PROMPT][AVAILABLE_TOOLS][" + weatherToolJSON + "][/AVAILABLE_TOOLS][INST]Weather in Paris?[/INST]" +
				"[TOOL_CALLS]get_weather[CALL_ID]call0001x[ARGS]{\"city\": \"Paris\"}</s>[TOOL_RESULTS]call0001x[TOOL_CONTENT]22C[/TOOL_RESULTS]"},

		// Gemma 2: no system role; assistant is "model".
		{"gemma2 multi", "google-gemma-2-2b-it.jinja", "<bos>", "<eos>", multiConv[1:], true, Vars{},
			"<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n<start_of_turn>user\nHow are you?<end_of_turn>\n<start_of_turn>model\n"},
		// Gemma 4: without enable_thinking the generation prompt closes an
		// empty thought channel.
		{"gemma4 basic", "google-gemma-4-31B-it.jinja", "<bos>", "<eos>", basicConv, false, Vars{},
			"<bos><|turn>system\nYou are helpful.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n"},
		{"gemma4 multi", "google-gemma-4-31B-it.jinja", "<bos>", "<eos>", multiConv, true, Vars{},
			"<bos><|turn>system\nSys<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n<|turn>user\nHow are you?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"},
		{"gemma4 multi thinking", "google-gemma-4-31B-it.jinja", "<bos>", "<eos>", multiConv, true, Vars{EnableThinking: boolPtr(true)},
			"<bos><|turn>system\n<|think|>\nSys<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n<|turn>user\nHow are you?<turn|>\n<|turn>model\n"},

		// Gemma 4 tools: declarations in its own notation (<|"|> quotes,
		// sorted keys, upper-case types); the tool result follows the call
		// in the same model turn, and no generation prompt comes after it.
		{"gemma4 tools", "google-gemma-4-31B-it.jinja", "<bos>", "<eos>", toolConv, true, Vars{Tools: tools},
			"<bos><|turn>system\n<|tool>declaration:get_weather{description:<|\"|>Get the current weather in a city<|\"|>," +
				"parameters:{properties:{city:{description:<|\"|>The city<|\"|>,type:<|\"|>STRING<|\"|>}},required:[<|\"|>city<|\"|>],type:<|\"|>OBJECT<|\"|>}}<tool|><turn|>\n" +
				"<|turn>user\nWeather in Paris?<turn|>\n" +
				"<|turn>model\n<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|><|tool_response>response:get_weather{value:<|\"|>22C<|\"|>}<tool_response|>"},

		// gpt-oss (harmony): the system message becomes the developer's
		// instructions; a final assistant turn without a generation prompt
		// ends with <|return|>.
		{"gpt-oss basic", "openai-gpt-oss-120b.jinja", "<|startoftext|>", "<|return|>", basicConv, false, Vars{Now: fixedNow},
			gptOSSSystem + "Reasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>" +
				"<|start|>developer<|message|># Instructions\n\nYou are helpful.\n\n<|end|>" +
				"<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>"},
		{"gpt-oss multi", "openai-gpt-oss-120b.jinja", "<|startoftext|>", "<|return|>", multiConv, true, Vars{Now: fixedNow, ReasoningEffort: "low"},
			gptOSSSystem + "Reasoning: low\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>" +
				"<|start|>developer<|message|># Instructions\n\nSys\n\n<|end|>" +
				"<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|end|>" +
				"<|start|>user<|message|>How are you?<|end|><|start|>assistant"},
		{"gpt-oss tools", "openai-gpt-oss-120b.jinja", "<|startoftext|>", "<|return|>", toolConv, true, Vars{Tools: tools, Now: fixedNow, ReasoningEffort: "high"},
			gptOSSSystem + "Reasoning: high\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.\nCalls to these tools must go to the commentary channel: 'functions'.<|end|>" +
				"<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n// Get the current weather in a city\ntype get_weather = (_: {\n// The city\ncity: string,\n}) => any;\n\n} // namespace functions<|end|>" +
				"<|start|>user<|message|>Weather in Paris?<|end|>" +
				"<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>" +
				"<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"22C\"<|end|><|start|>assistant"},

		// Kimi K2 Thinking: tool call ids queued with append, taken back
		// with pop for the tool result.
		{"kimi-k2-thinking tools", "Kimi-K2-Thinking.jinja", "", "<|im_end|>", toolConv, true, Vars{Tools: tools},
			"<|im_system|>tool_declare<|im_middle|>[" + weatherToolJSON + "]<|im_end|>" +
				"<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>" +
				"<|im_user|>user<|im_middle|>Weather in Paris?<|im_end|>" +
				"<|im_assistant|>assistant<|im_middle|><think></think><|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>" +
				"<|im_system|>get_weather<|im_middle|>## Return of functions.get_weather:0\n22C<|im_end|><|im_assistant|>assistant<|im_middle|>"},

		// DeepSeek R1 distills: the system prompt right after BOS; the Qwen
		// distill's template (llama.cpp's copy) closes the think block
		// unless enable_thinking.
		{"r1-distill-qwen basic", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", dsBOS, "<｜end▁of▁sentence｜>", basicConv, false, Vars{},
			dsBOS + "You are helpful.<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜>"},
		{"r1-distill-qwen multi", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", dsBOS, "<｜end▁of▁sentence｜>", multiConv, true, Vars{},
			dsBOS + "Sys<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜><｜User｜>How are you?<｜Assistant｜><think>\n</think>"},
		{"r1-distill-qwen multi thinking", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", dsBOS, "<｜end▁of▁sentence｜>", multiConv, true, Vars{EnableThinking: boolPtr(true)},
			dsBOS + "Sys<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜><｜User｜>How are you?<｜Assistant｜><think>\n"},
		{"r1-distill-llama basic", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", dsBOS, "<｜end▁of▁sentence｜>", basicConv, false, Vars{},
			dsBOS + "You are helpful.<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜>"},
		// Reasoning before </think> in an earlier assistant turn is dropped.
		{"r1-distill-llama multi", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", dsBOS, "<｜end▁of▁sentence｜>",
			[]Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "<think>\nhmm\n</think>\n\nHello!"}, {Role: "user", Content: "How are you?"}}, true, Vars{},
			dsBOS + "<｜User｜>Hi<｜Assistant｜>\n\nHello!<｜end▁of▁sentence｜><｜User｜>How are you?<｜Assistant｜><think>\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := New(readTemplate(t, tc.file), tc.bos, tc.eos)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.RenderVars(tc.msgs, tc.gen, tc.vars)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
