package toolcall

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ardanlabs/jinja"
	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/internal/shareddata"
)

// The real templates in ../shared/templates say which format their models
// write: Detect must pick it, and what each template renders for an
// assistant turn with tool calls (or with reasoning and content), which is
// what its model learned to write, must parse back to that turn in every
// split.

func readTemplate(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(shareddata.Path(t, filepath.Join("templates", name+".jinja")))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDetectTemplates(t *testing.T) {
	for name, want := range map[string]Format{
		"Qwen-Qwen3-0.6B":          FormatHermes,
		"Qwen-QwQ-32B":             FormatHermes,
		"Qwen-Qwen2.5-7B-Instruct": FormatHermes,
		"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": FormatHermes,
		"NousResearch-Hermes-3-Llama-3.1-8B-tool_use":   FormatHermes,
		"ibm-granite-granite-4.0":                       FormatHermes,
		"Qwen3-Coder":                                   FormatQwen3Coder,
		"Qwen3.5-4B":                                    FormatQwen3Coder,
		"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16":           FormatQwen3Coder,
		"meta-llama-Llama-3.1-8B-Instruct":              FormatLlama3,
		"meta-llama-Llama-3.2-3B-Instruct":              FormatLlama3,
		"meta-llama-Llama-3.3-70B-Instruct":             FormatLlama3,
		"mistralai-Mistral-Nemo-Instruct-2407":          FormatMistral,
		"Mistral-Small-3.2-24B-Instruct-2506":           FormatMistral,
		"unsloth-mistral-Devstral-Small-2507":           FormatMistral,
		"mistralai-Ministral-3-14B-Reasoning-2512":      FormatMistral,
		"openai-gpt-oss-120b":                           FormatHarmony,
		"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B":      FormatDeepSeek,
		"deepseek-ai-DeepSeek-R1-Distill-Llama-8B":      FormatDeepSeek,
		"llama-cpp-deepseek-r1":                         FormatDeepSeek,
		"deepseek-ai-DeepSeek-V3.1":                     FormatDeepSeek,
		"deepseek-ai-DeepSeek-V3.2":                     FormatDeepSeekDSML,
		"deepseek-ai-DeepSeek-V4":                       FormatDeepSeekDSML,
		"google-gemma-2-2b-it":                          FormatGeneric,
		"microsoft-Phi-3.5-mini-instruct":               FormatGeneric,
		"GLM-4.6":                                       FormatGeneric, // its own <tool_call>NAME<arg_key> style, not parsed yet
		"inclusionai-ling-3.0-flash":                    FormatGeneric, // likewise
	} {
		if got := Detect(readTemplate(t, name)); got != want {
			t.Errorf("Detect(%s) = %v, want %v", name, got, want)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range Formats() {
		got, err := ParseFormat(strings.ToUpper(f.String()))
		if err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v", f.String(), got, err, f)
		}
	}
	if _, err := ParseFormat("hermes2"); err == nil {
		t.Errorf("ParseFormat(hermes2): no error")
	}
}

// rendered is a template rendering one assistant turn.
type rendered struct {
	template string
	// calls: how many of the two calls the template can render (Llama 3
	// and gpt-oss render one).
	calls int
	// reasoning: the template renders the last turn's reasoning.
	reasoning bool
	// drop is rendered at the turn's start in history but not written by
	// the model after its generation prompt (DeepSeek V3.2/V4 put
	// "</think>" there where the prompt had "<think></think>").
	drop string
}

var renderedTemplates = []rendered{
	{template: "Qwen-Qwen3-0.6B", calls: 2, reasoning: true},
	{template: "Qwen-QwQ-32B", calls: 2},
	{template: "Qwen-Qwen2.5-7B-Instruct", calls: 2},
	{template: "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", calls: 2},
	{template: "NousResearch-Hermes-3-Llama-3.1-8B-tool_use", calls: 2},
	{template: "Qwen3-Coder", calls: 2},
	{template: "Qwen3.5-4B", calls: 2, reasoning: true},
	{template: "meta-llama-Llama-3.1-8B-Instruct", calls: 1},
	{template: "meta-llama-Llama-3.2-3B-Instruct", calls: 1},
	{template: "meta-llama-Llama-3.3-70B-Instruct", calls: 1},
	{template: "mistralai-Mistral-Nemo-Instruct-2407", calls: 2},
	{template: "Mistral-Small-3.2-24B-Instruct-2506", calls: 2},
	{template: "unsloth-mistral-Devstral-Small-2507", calls: 2},
	{template: "mistralai-Ministral-3-14B-Reasoning-2512", calls: 2},
	{template: "openai-gpt-oss-120b", calls: 1, reasoning: true},
	{template: "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", calls: 2},
	{template: "deepseek-ai-DeepSeek-V3.1", calls: 2},
	{template: "deepseek-ai-DeepSeek-V3.2", calls: 2, drop: "</think>"},
	{template: "deepseek-ai-DeepSeek-V4", calls: 2, drop: "</think>"},
}

var (
	weatherArgs = map[string]any{"city": "Paris", "days": 3, "units": []any{"c", "f"}, "note": "say \"hi\" <tool_call> [TOOL_CALLS] caf\u00e9"}
	timeArgs    = map[string]any{"tz": "Asia/Tokyo", "exact": true}
	tmplTools   = []any{
		map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "description": "Weather", "parameters": map[string]any{"type": "object", "properties": map[string]any{
			"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}, "units": map[string]any{"type": "array"}, "note": map[string]any{"type": "string"}}}}},
		map[string]any{"type": "function", "function": map[string]any{"name": "get_time", "description": "Time", "parameters": map[string]any{"type": "object", "properties": map[string]any{
			"tz": map[string]any{"type": "string"}, "exact": map[string]any{"type": "boolean"}}}}},
	}
)

// assistantOutput renders [user, assistant] and returns what the template
// put after the user's turn and the generation prompt, up to the end of
// the turn, and whether the generation prompt opened reasoning.
func assistantOutput(t *testing.T, r rendered, assistant map[string]any) (string, bool) {
	t.Helper()
	tm, err := jinja.Compile(readTemplate(t, r.template))
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	user := map[string]any{"role": "user", "content": "USERMSG"}
	render := func(msgs []any, gen bool) string {
		out, err := tm.RenderValues(map[string]jinja.Value{
			"messages":              jinja.FromGoValue(msgs),
			"tools":                 jinja.FromGoValue(tmplTools),
			"add_generation_prompt": jinja.NewBool(gen),
			"bos_token":             jinja.NewString("<BOS>"),
			"eos_token":             jinja.NewString("<EOS>"),
		})
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		i := strings.Index(out, "USERMSG")
		if i < 0 {
			t.Fatalf("render lost the user's message: %q", out)
		}
		return out[i+len("USERMSG"):]
	}
	prompt := render([]any{user}, true)
	full := render([]any{user, assistant}, false)
	// The turn starts where the generation prompt and the turn part, backed
	// off to the start of a marker the cut would split.
	n := 0
	for n < len(prompt) && n < len(full) && prompt[n] == full[n] {
		n++
	}
	if i := strings.LastIndexAny(full[:n], "<["); i >= 0 && !strings.ContainsAny(full[i:n], ">]") {
		n = i
	}
	out := strings.TrimPrefix(full[n:], r.drop)
	end := len(out)
	for _, m := range []string{"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<EOS>", "<｜end▁of▁sentence｜>", "<|return|>"} {
		if i := strings.Index(out, m); i >= 0 && i < end {
			end = i
		}
	}
	return out[:end], OpensReasoning(Detect(readTemplate(t, r.template)), prompt[:n])
}

func TestTemplatesRoundTrip(t *testing.T) {
	toolCall := func(id, name string, args map[string]any) map[string]any {
		return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}
	}
	opts := Options{Tools: []Tool{
		{Name: "get_weather", Parameters: mustJSON(t, tmplTools[0].(map[string]any)["function"].(map[string]any)["parameters"])},
		{Name: "get_time", Parameters: mustJSON(t, tmplTools[1].(map[string]any)["function"].(map[string]any)["parameters"])},
	}}
	for _, r := range renderedTemplates {
		t.Run(r.template, func(t *testing.T) {
			f := Detect(readTemplate(t, r.template))
			tcs := []any{toolCall("call00001", "get_weather", weatherArgs), toolCall("call00002", "get_time", timeArgs)}[:r.calls]
			out, inReasoning := assistantOutput(t, r, map[string]any{"role": "assistant", "content": "", "tool_calls": tcs})
			o := opts
			o.InReasoning = inReasoning
			wantCalls := []any{weatherArgs, timeArgs}[:r.calls]
			wantNames := []string{"get_weather", "get_time"}[:r.calls]
			for k, pieces := range splits(out, 7) {
				got := feed(t, f, o, pieces)
				if got.Err != "" || got.Content != "" || len(got.Calls) != r.calls {
					t.Fatalf("split %d of %q: %+v", k, out, got)
				}
				for i, c := range got.Calls {
					var args any
					if err := json.Unmarshal([]byte(c.Args), &args); err != nil {
						t.Fatalf("call %d arguments %q: %v", i, c.Args, err)
					}
					if diff := cmp.Diff(normJSON(t, wantCalls[i]), args); c.Name != wantNames[i] || diff != "" {
						t.Fatalf("split %d of %q: call %d %s (-want +got)\n%s", k, out, i, c.Name, diff)
					}
				}
			}

			content := "Sunny, 21 \u00b0C.\nTake a hat."
			out, inReasoning = assistantOutput(t, r, map[string]any{"role": "assistant", "content": content,
				"reasoning_content": "The user asks about weather.", "thinking": "The user asks about weather."})
			o.InReasoning = inReasoning
			want := result{Content: content}
			if r.reasoning {
				want.Reasoning = "The user asks about weather."
			}
			for k, pieces := range splits(out, 9) {
				if diff := cmp.Diff(want, feed(t, f, o, pieces)); diff != "" {
					t.Fatalf("split %d of %q: (-want +got)\n%s", k, out, diff)
				}
			}
		})
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// normJSON returns v as encoding/json decodes it (numbers as float64).
func normJSON(t *testing.T, v any) any {
	var out any
	if err := json.Unmarshal(mustJSON(t, v), &out); err != nil {
		t.Fatal(err)
	}
	return out
}
