package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-inference/weft/internal/shareddata"
)

// sharedTemplates returns the paths of the .jinja files in
// shared/templates (llama.cpp de3ff81's collection of 70 real models'
// templates).
func sharedTemplates(t *testing.T) map[string]string {
	t.Helper()
	dir := filepath.Dir(shareddata.Path(t, "templates/README.md"))
	files, err := filepath.Glob(filepath.Join(dir, "*.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]string, len(files))
	for _, f := range files {
		m[filepath.Base(f)] = f
	}
	return m
}

func readTemplate(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(shareddata.Path(t, "templates/"+name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The conversations every template of shared/templates renders.
var (
	convSystem = []Message{{Role: "system", Content: "SYS-1"}, {Role: "user", Content: "USER-1"}, {Role: "assistant", Content: "ASSISTANT-1"}}
	convMulti  = []Message{{Role: "system", Content: "SYS-1"}, {Role: "user", Content: "USER-1"}, {Role: "assistant", Content: "ASSISTANT-1"}, {Role: "user", Content: "USER-2"}}
	// convTools: a tool call (Mistral's templates want 9-character
	// alphanumeric ids) and its result, then a second question.
	convTools = []Message{{Role: "system", Content: "SYS-1"}, {Role: "user", Content: "USER-1"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "call0001x", Name: "get_weather", Arguments: `{"city": "Paris"}`}}},
		{Role: "tool", Content: "TOOL-RESULT-1", ToolCallID: "call0001x", Name: "get_weather"},
		{Role: "assistant", Content: "ASSISTANT-1"}, {Role: "user", Content: "USER-2"}}
	weatherTool = json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"}}, "required": ["city"]}}}`)
	fixedNow    = time.Date(2026, time.March, 5, 10, 0, 0, 0, time.UTC)
)

// templateOutcomes is what each template of shared/templates does; the
// report of issue 32 carries the same table. refused: Compile refuses the
// template, with an error containing this text (the unsupported construct
// and its line). noSystem: the template itself rejects a system message
// (raise_exception), so the conversations are rendered without it. tools:
// "" when the template renders convTools with a tool definition, else the
// text of the template's own rejection. omits: message contents the
// template leaves out of some conversation by design (not checked).
var templateOutcomes = []struct {
	file     string
	refused  string
	noSystem bool
	tools    string
	omits    []string
}{
	{"Apertus-8B-Instruct.jinja", "", false, "", nil},
	{"Apriel-1.6-15b-Thinker-fixed.jinja", "", false, "", nil},
	{"Bielik-11B-v3.0-Instruct.jinja", "", false, "", nil},
	{"ByteDance-Seed-OSS.jinja", "", false, "", nil},
	{"Cohere2MoE.jinja", "", false, "", nil},
	{"CohereForAI-c4ai-command-r-plus-tool_use.jinja", "", false, "", nil},
	{"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "", false, "", nil},
	{"GLM-4.6.jinja", "", false, "", nil},
	{"GLM-4.7-Flash.jinja", "", false, "", nil},
	{"GigaChat3-10B-A1.8B.jinja", "", false, "", nil},
	{"GigaChat3.1-10B-A1.8B.jinja", "", false, "", nil},
	{"HuggingFaceTB-SmolLM3-3B.jinja", "", false, "", nil},
	{"Kimi-K2-Instruct.jinja", "", false, "", nil},
	{"Kimi-K2-Thinking.jinja", "", false, "", nil},
	{"Kimi-K3.jinja", "", false, "", nil},
	{"LFM2-8B-A1B.jinja", "", false, "", nil},
	{"LFM2.5-8B-A1B.jinja", "", false, "", nil},
	{"LFM2.5-Instruct.jinja", "", false, "", nil},
	{"MiMo-VL.jinja", "", false, "", nil},
	{"MiniMax-M1.jinja", "", false, "", nil},
	{"MiniMax-M2.jinja", "", false, "", nil},
	{"MiniMax-M3.jinja", "", false, "", nil},
	{"Mistral-Small-3.2-24B-Instruct-2506.jinja", "", false, "", nil},
	{"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "", false, "", nil},
	{"NVIDIA-Nemotron-Nano-v2.jinja", "", false, "", nil},
	{"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "", false, "", nil},
	{"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "", false, "", nil},
	{"Qwen-QwQ-32B.jinja", "", false, "", nil},
	{"Qwen-Qwen2.5-7B-Instruct.jinja", "", false, "", nil},
	{"Qwen-Qwen3-0.6B.jinja", "", false, "", nil},
	{"Qwen3-Coder.jinja", "", false, "", nil},
	{"Qwen3.5-4B.jinja", "", false, "", nil},
	{"Reka-Edge.jinja", "", false, "", nil},
	{"Spark2.5.jinja", "", false, "", nil},
	{"StepFun3.5-Flash.jinja", "", false, "", nil},
	{"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "", false, "", nil},
	{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "", false, "", nil},
	{"deepseek-ai-DeepSeek-V3.1.jinja", "", false, "", nil},
	{"deepseek-ai-DeepSeek-V3.2.jinja", "", false, "", nil},
	{"deepseek-ai-DeepSeek-V4-Flash-0731.jinja", "", false, "", nil},
	{"deepseek-ai-DeepSeek-V4.jinja", "", false, "", nil},
	{"fireworks-ai-llama-3-firefunction-v2.jinja", "", false, "", nil},
	{"google-gemma-2-2b-it.jinja", "", true, "Conversation roles must alternate", nil},
	{"google-gemma-4-31B-it-interleaved.jinja", "", false, "", nil},
	{"google-gemma-4-31B-it.jinja", "", false, "", nil},
	{"ibm-granite-granite-3.3-2B-Instruct.jinja", "", false, "", nil},
	{"ibm-granite-granite-4.0.jinja", "", false, "", nil},
	{"ibm-granite-granite-4.1.jinja", "", false, "", nil},
	{"inclusionai-ling-3.0-flash.jinja", "", false, "", nil},
	{"llama-cpp-deepseek-r1.jinja", "", false, "", nil},
	// No tool role: tool results are dropped.
	{"llama-cpp-rwkv-world.jinja", "", false, "", []string{"TOOL-RESULT-1"}},
	{"meetkai-functionary-medium-v3.1.jinja", "", false, "", nil},
	{"meetkai-functionary-medium-v3.2.jinja", "", false, "", nil},
	{"meta-llama-Llama-3.1-8B-Instruct.jinja", "", false, "", nil},
	{"meta-llama-Llama-3.2-3B-Instruct.jinja", "", false, "", nil},
	{"meta-llama-Llama-3.3-70B-Instruct.jinja", "", false, "", nil},
	// No tool role: tool results are dropped.
	{"microsoft-Phi-3.5-mini-instruct.jinja", "", false, "", []string{"TOOL-RESULT-1"}},
	{"mistralai-Ministral-3-14B-Reasoning-2512.jinja", "", false, "", nil},
	// The system message goes before the last message only when that is
	// the user's: convSystem (ending with the assistant) has none.
	{"mistralai-Mistral-Nemo-Instruct-2407.jinja", "", false, "", []string{"SYS-1"}},
	{"moonshotai-Kimi-K2.jinja", "", false, "", nil},
	{"muse-glimmer.jinja", "", false, "", nil},
	{"openai-gpt-oss-120b.jinja", "", false, "", nil},
	{"openbmb-MiniCPM5-1B.jinja", "", false, "", nil},
	{"poolside-Laguna-S-2.1.jinja", "", false, "", nil},
	{"poolside-Laguna-XS-2.1.jinja", "", false, "", nil},
	{"poolside-Laguna-XS.2.jinja", "", false, "", nil},
	{"tencent-Hy3.jinja", "", false, "", nil},
	{"unsloth-Apriel-1.5.jinja", "", false, "", nil},
	{"unsloth-mistral-Devstral-Small-2507.jinja", "", false, "", nil},
	{"upstage-Solar-Open-100B.jinja", "", false, "", nil},
}

// TestSharedTemplates walks shared/templates: every template either compiles
// and renders a system/user/assistant conversation, a multi-turn one with
// add_generation_prompt and a tool conversation (every message's text in
// the output), or is refused by Compile with the reason in
// templateOutcomes. A template added to or missing from the folder, or a
// change of outcome either way, fails.
func TestSharedTemplates(t *testing.T) {
	files := sharedTemplates(t)
	seen := map[string]bool{}
	for _, tc := range templateOutcomes {
		seen[tc.file] = true
		t.Run(tc.file, func(t *testing.T) {
			if _, ok := files[tc.file]; !ok {
				t.Fatalf("%s is not in shared/templates", tc.file)
			}
			tmpl, err := New(readTemplate(t, tc.file), "<s>", "</s>")
			if tc.refused != "" {
				if !errors.Is(err, ErrInvalidTemplate) || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("New = %v, want ErrInvalidTemplate containing %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			drop := func(msgs []Message) []Message {
				if tc.noSystem {
					return msgs[1:]
				}
				return msgs
			}
			if tc.noSystem {
				_, err := tmpl.Render(convSystem, false)
				var rej *RejectedError
				if !errors.As(err, &rej) {
					t.Errorf("Render with a system message = %v, want the template's rejection", err)
				}
			}
			for _, r := range []struct {
				msgs []Message
				gen  bool
				v    Vars
				want string
			}{
				{drop(convSystem), false, Vars{}, ""},
				{drop(convMulti), true, Vars{}, ""},
				{drop(convTools), true, Vars{Tools: []json.RawMessage{weatherTool}, Now: fixedNow}, tc.tools},
			} {
				out, err := tmpl.RenderVars(r.msgs, r.gen, r.v)
				if r.want != "" {
					if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), r.want) {
						t.Errorf("RenderVars(%d messages) = %v, want the template's rejection %q", len(r.msgs), err, r.want)
					}
					continue
				}
				if err != nil {
					t.Errorf("RenderVars(%d messages, %v): %v", len(r.msgs), r.gen, err)
					continue
				}
				for _, m := range r.msgs {
					if m.Content != "" && !slices.Contains(tc.omits, m.Content) && !strings.Contains(out, m.Content) {
						t.Errorf("RenderVars(%d messages, %v): %q missing from\n%s", len(r.msgs), r.gen, m.Content, out)
					}
				}
			}
		})
	}
	for f := range files {
		if !seen[f] {
			t.Errorf("%s: in shared/templates but not in templateOutcomes", f)
		}
	}
}
