package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/toolcall"
	"github.com/weft-inference/weft/scheduler"
)

// weatherSchema is the test tool's parameters: bounded so that a call on
// stories260K ends within the test's max_tokens.
const weatherSchema = `{"type":"object","properties":{"city":{"type":"string","maxLength":12},` +
	`"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}`

const clockSchema = `{"type":"object","properties":{"zone":{"enum":["utc","local"]}},"required":["zone"]}`

// newToolFixture serves stories260K with Qwen3's chat template, which
// renders tools itself and is detected as the hermes format. stories260K's
// vocabulary has none of Qwen's special tokens: the markers (<tool_call>,
// <|im_start|>) are plain text, which the hermes parser reads alike.
func newToolFixture(t *testing.T) *fixture {
	t.Helper()
	src, err := os.ReadFile(shareddata.Path(t, "templates/Qwen-Qwen3-0.6B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.New(string(src), "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, false, func(d *frontdoor.Config, _ *Config) { d.Chat = tmpl })
	if got := f.h.door.Tools(); got != (frontdoor.Tools{Format: toolcall.FormatHermes, Native: true}) {
		t.Fatalf("Door.Tools() = %+v, want hermes, native", got)
	}
	return f
}

func schemaParam(t *testing.T, s string) shared.FunctionParameters {
	t.Helper()
	var m shared.FunctionParameters
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func testTools(t *testing.T) []oai.ChatCompletionToolUnionParam {
	return []oai.ChatCompletionToolUnionParam{
		oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather",
			Description: oai.String("The weather in a city."), Parameters: schemaParam(t, weatherSchema)}),
		oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time",
			Parameters: schemaParam(t, clockSchema)}),
	}
}

func compileSchema(t *testing.T, s string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// checkCall checks that a call names one of the tools and that its
// arguments parse and validate against the tool's schema.
func checkCall(t *testing.T, schemas map[string]*jsonschema.Schema, name, args string) {
	t.Helper()
	sch, ok := schemas[name]
	if !ok {
		t.Fatalf("call of unknown tool %q", name)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		t.Fatalf("%s arguments %q do not parse: %v", name, args, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("%s arguments %s do not validate: %v", name, args, err)
	}
}

// TestToolChoiceEnforced: with tool_choice required (one call) or a named
// tool, every reply of stories260K at temperature 1 over 20 seeds is tool
// calls whose arguments validate against their tool's schema, with
// finish_reason tool_calls; the streamed deltas, accumulated by the SDK's
// ChatCompletionAccumulator, rebuild the same calls.
func TestToolChoiceEnforced(t *testing.T) {
	f := newToolFixture(t)
	schemas := map[string]*jsonschema.Schema{"get_weather": compileSchema(t, weatherSchema), "get_time": compileSchema(t, clockSchema)}
	for _, tc := range []struct {
		name   string
		choice oai.ChatCompletionToolChoiceOptionUnionParam
		want   string // the only tool allowed, or "" for any
	}{
		{"required", oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("required")}, ""},
		{"named", oai.ToolChoiceOptionFunctionToolChoice(oai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}), "get_weather"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range int64(20) {
				params := oai.ChatCompletionNewParams{
					Model:               oai.ChatModel(f.model),
					Messages:            []oai.ChatCompletionMessageParamUnion{oai.UserMessage("What is the weather in Paris?")},
					Tools:               testTools(t),
					ToolChoice:          tc.choice,
					ParallelToolCalls:   oai.Bool(false),
					MaxCompletionTokens: oai.Int(400),
					Temperature:         oai.Float(1),
					Seed:                oai.Int(seed),
				}
				got, err := f.client.Chat.Completions.New(t.Context(), params)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				c := got.Choices[0]
				if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
					t.Fatalf("seed %d: finish_reason %q, %d calls, content %q; want tool_calls, 1 call", seed, c.FinishReason, len(c.Message.ToolCalls), c.Message.Content)
				}
				call := c.Message.ToolCalls[0]
				if tc.want != "" && call.Function.Name != tc.want {
					t.Fatalf("seed %d: called %q, want %q", seed, call.Function.Name, tc.want)
				}
				if call.Type != "function" || !strings.HasPrefix(call.ID, "call_") {
					t.Errorf("seed %d: call type %q id %q", seed, call.Type, call.ID)
				}
				checkCall(t, schemas, call.Function.Name, call.Function.Arguments)
				if c.Message.Content != "" {
					t.Errorf("seed %d: content %q beside the call", seed, c.Message.Content)
				}

				s := f.client.Chat.Completions.NewStreaming(t.Context(), params)
				var acc oai.ChatCompletionAccumulator
				for s.Next() {
					acc.AddChunk(s.Current())
				}
				if err := s.Err(); err != nil {
					t.Fatalf("seed %d: stream: %v", seed, err)
				}
				sc := acc.Choices[0]
				type flat struct{ Name, Args, Finish string }
				want := flat{call.Function.Name, call.Function.Arguments, "tool_calls"}
				if len(sc.Message.ToolCalls) != 1 {
					t.Fatalf("seed %d: streamed %d calls", seed, len(sc.Message.ToolCalls))
				}
				sg := sc.Message.ToolCalls[0]
				if diff := cmp.Diff(want, flat{sg.Function.Name, sg.Function.Arguments, sc.FinishReason}); diff != "" {
					t.Errorf("seed %d: streamed call (-non-streamed +streamed):\n%s", seed, diff)
				}
				if sg.ID == "" || sg.Type != "function" {
					t.Errorf("seed %d: streamed id %q type %q", seed, sg.ID, sg.Type)
				}
			}
		})
	}
}

// TestToolRoundTrip: a call, its result as a tool message, and the next
// reply; the history (assistant tool_calls with null content, the tool
// message) reaches Qwen3's template, which renders them its own way.
func TestToolRoundTrip(t *testing.T) {
	f := newToolFixture(t)
	ctx := t.Context()
	params := oai.ChatCompletionNewParams{
		Model:               oai.ChatModel(f.model),
		Messages:            []oai.ChatCompletionMessageParamUnion{oai.UserMessage("What is the weather in Paris?")},
		Tools:               testTools(t),
		ToolChoice:          oai.ToolChoiceOptionFunctionToolChoice(oai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
		MaxCompletionTokens: oai.Int(400),
		Seed:                oai.Int(7),
	}
	first, err := f.client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	msg := first.Choices[0].Message
	if len(msg.ToolCalls) != 1 {
		t.Fatalf("first reply: %d calls", len(msg.ToolCalls))
	}
	params.Messages = append(params.Messages, msg.ToParam(), oai.ToolMessage(`{"temperature": 21}`, msg.ToolCalls[0].ID))
	params.ToolChoice = oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("auto")}
	params.MaxCompletionTokens = oai.Int(20)
	params.Temperature = oai.Float(0)
	params.SetExtraFields(map[string]any{"ignore_eos": true})
	second, err := f.client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	c := second.Choices[0]
	if c.FinishReason != "length" || len(c.Message.ToolCalls) != 0 || c.Message.Content == "" {
		t.Errorf("second reply: finish %q, %d calls, content %q; want length, no call, text", c.FinishReason, len(c.Message.ToolCalls), c.Message.Content)
	}
	// The prompt of the second turn holds the first's (the same tools and
	// question) and the call and its result as Qwen3's template writes
	// them: the prefix cache serves the first prompt's full blocks.
	if second.Usage.PromptTokens <= first.Usage.PromptTokens+10 {
		t.Errorf("second prompt %d tokens, first %d: the history did not grow", second.Usage.PromptTokens, first.Usage.PromptTokens)
	}
	if cached := second.Usage.PromptTokensDetails.CachedTokens; cached == 0 {
		t.Errorf("second prompt: no token from the prefix cache")
	}
}

// TestToolErrors: the 400s of tool requests, each naming its field.
func TestToolErrors(t *testing.T) {
	f := newToolFixture(t)
	tool := `{"type":"function","function":{"name":"get_weather","parameters":` + weatherSchema + `}}`
	user := `{"role":"user","content":"hi"}`
	for _, tc := range []struct {
		name, body, param string
	}{
		{"unknown tool type", `{"messages":[` + user + `],"tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{"malformed schema", `{"messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer","minimum":"x"}}}}}]}`, "tools[0].function.parameters"},
		{"schema not an object", `{"messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]}`, "tools[0].function.parameters"},
		{"bad function name", `{"messages":[` + user + `],"tools":[{"type":"function","function":{"name":"a b"}}]}`, "tools[0].function.name"},
		{"unknown tool_choice function", `{"messages":[` + user + `],"tools":[` + tool + `],"tool_choice":{"type":"function","function":{"name":"nope"}}}`, "tool_choice"},
		{"bad tool_choice", `{"messages":[` + user + `],"tools":[` + tool + `],"tool_choice":"always"}`, "tool_choice"},
		{"required without tools", `{"messages":[` + user + `],"tool_choice":"required"}`, "tool_choice"},
		{"tool message without a call", `{"messages":[` + user + `,{"role":"tool","tool_call_id":"call_x","content":"1"}],"tools":[` + tool + `]}`, "messages[1].tool_call_id"},
		{"tool message answering a later call", `{"messages":[` + user + `,{"role":"tool","tool_call_id":"call_1","content":"1"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}]}`, "messages[1].tool_call_id"},
		{"enable_thinking not a bool", `{"messages":[` + user + `],"chat_template_kwargs":{"enable_thinking":"yes"}}`, "chat_template_kwargs.enable_thinking"},
		{"control token text in call arguments", `{"messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"</s>\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"1"}],"tools":[` + tool + `]}`, "messages[1].tool_calls[0].function.arguments"},
		{"control token text in a call id", `{"messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"c</s>","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c</s>","content":"1"}],"tools":[` + tool + `]}`, "messages[1].tool_calls[0].id"},
		{"control token text in a tool description", `{"messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f","description":"x</s>y","parameters":{"type":"object"}}}]}`, "tools[0]"},
		{"call arguments not JSON", `{"messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{"}}]}]}`, "messages[1].tool_calls[0].function.arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body map[string]any
			if err := json.Unmarshal([]byte(tc.body), &body); err != nil {
				t.Fatal(err)
			}
			body["model"] = f.model
			b, _ := json.Marshal(body)
			req, _ := http.NewRequestWithContext(t.Context(), "POST", f.srv.URL+"/v1/chat/completions", bytes.NewReader(b))
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var eb struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
				t.Fatal(err)
			}
			param := ""
			if eb.Error.Param != nil {
				param = *eb.Error.Param
			}
			if diff := cmp.Diff([]any{400, "invalid_request_error", tc.param}, []any{resp.StatusCode, eb.Error.Type, param}); diff != "" {
				t.Errorf("(-want +got):\n%s\nmessage: %s", diff, eb.Error.Message)
			}
		})
	}
	// The SDK sees the same as an *oai.Error.
	_, err := f.client.Chat.Completions.New(t.Context(), oai.ChatCompletionNewParams{
		Model:      oai.ChatModel(f.model),
		Messages:   []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")},
		Tools:      testTools(t),
		ToolChoice: oai.ToolChoiceOptionFunctionToolChoice(oai.ChatCompletionNamedToolChoiceFunctionParam{Name: "nope"}),
	})
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "tool_choice" {
		t.Errorf("SDK error %v, want 400 on tool_choice", err)
	}
}

// TestToolsGenericFallback: ChatML knows no tools, so the tools go into a
// system prompt and the reply is read in the generic format; required with
// parallel calls still gives only calls that validate, and a max_tokens
// that cuts the call gives finish_reason length with the cut call left
// out.
func TestToolsGenericFallback(t *testing.T) {
	tmpl, err := chat.Fallback("chatml")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, false, func(d *frontdoor.Config, _ *Config) { d.Chat = tmpl })
	if got := f.h.door.Tools(); got != (frontdoor.Tools{Format: toolcall.FormatGeneric}) {
		t.Fatalf("Door.Tools() = %+v, want generic, not native", got)
	}
	schemas := map[string]*jsonschema.Schema{"get_weather": compileSchema(t, weatherSchema), "get_time": compileSchema(t, clockSchema)}
	params := oai.ChatCompletionNewParams{
		Model:               oai.ChatModel(f.model),
		Messages:            []oai.ChatCompletionMessageParamUnion{oai.UserMessage("What is the weather in Paris?")},
		Tools:               testTools(t),
		ToolChoice:          oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("required")},
		MaxCompletionTokens: oai.Int(1500),
	}
	for _, parallel := range []bool{false, true} {
		params.ParallelToolCalls = oai.Bool(parallel)
		for seed := range int64(5) {
			params.Seed = oai.Int(seed)
			got, err := f.client.Chat.Completions.New(t.Context(), params)
			if err != nil {
				t.Fatalf("parallel %v seed %d: %v", parallel, seed, err)
			}
			c := got.Choices[0]
			// With parallel calls the grammar lets a call follow a call, and
			// stories260K at temperature 1 may go on calling until
			// max_tokens: the complete calls stand, with finish_reason length.
			ok := c.FinishReason == "tool_calls" && len(c.Message.ToolCalls) == 1
			if parallel {
				ok = (c.FinishReason == "tool_calls" || c.FinishReason == "length") && len(c.Message.ToolCalls) >= 1
			}
			if !ok {
				t.Fatalf("parallel %v seed %d: finish_reason %q, %d calls", parallel, seed, c.FinishReason, len(c.Message.ToolCalls))
			}
			for _, call := range c.Message.ToolCalls {
				checkCall(t, schemas, call.Function.Name, call.Function.Arguments)
			}
			if got.Usage.CompletionTokensDetails.ReasoningTokens != 0 {
				t.Errorf("seed %d: %d reasoning tokens", seed, got.Usage.CompletionTokensDetails.ReasoningTokens)
			}
		}
	}

	params.MaxCompletionTokens = oai.Int(12)
	params.ParallelToolCalls = oai.Bool(false)
	params.Seed = oai.Int(1)
	got, err := f.client.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Choices[0]; c.FinishReason != "length" || len(c.Message.ToolCalls) != 0 {
		t.Errorf("cut call: finish_reason %q, %d calls; want length, none", c.FinishReason, len(c.Message.ToolCalls))
	}
}

// TestReplyShapes: a parsed reply (reasoning, content, two calls) as a
// message and as stream deltas, piece by piece.
func TestReplyShapes(t *testing.T) {
	n := 0
	r := reply{frontdoor.ReplyOf(toolcall.NewParser(toolcall.FormatHermes, toolcall.Options{NewID: func() string { n++; return "call_" + string(rune('a'+n-1)) }}))}
	text := "<think>hmm</think>\n\nSure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>"
	var ds []chatOut
	for i := 0; i < len(text); i += 3 {
		ds = append(ds, deltas(r.Push(text[i:min(i+3, len(text))], 1))...)
	}
	ds = append(ds, deltas(r.Finish())...)
	fr, err := r.finishReason(&scheduler.Final{Reason: scheduler.FinishEOS}, "stop")
	if err != nil || fr != "tool_calls" {
		t.Fatalf("finishReason = %q, %v", fr, err)
	}
	content := "Sure."
	want := &chatOut{Role: "assistant", Content: &content, ReasoningContent: "hmm", ToolCalls: []wireToolCall{
		{ID: "call_a", Type: "function", Function: wireFunction{Name: "f", Arguments: `{"a": 1}`}},
		{ID: "call_b", Type: "function", Function: wireFunction{Name: "g", Arguments: `{}`}},
	}}
	if diff := cmp.Diff(want, r.message()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
	// The deltas merged: the same message (ids and names from the first
	// delta of each call, arguments concatenated by index).
	merged := &chatOut{Role: "assistant", Content: new(string)}
	for _, d := range ds {
		if d.Content != nil {
			*merged.Content += *d.Content
		}
		merged.ReasoningContent += d.ReasoningContent
		for _, c := range d.ToolCalls {
			if c.ID != "" {
				merged.ToolCalls = append(merged.ToolCalls, wireToolCall{ID: c.ID, Type: c.Type, Function: wireFunction{Name: c.Function.Name}})
			}
			merged.ToolCalls[*c.Index].Function.Arguments += c.Function.Arguments
		}
	}
	if diff := cmp.Diff(want, merged); diff != "" {
		t.Errorf("merged deltas (-want +got):\n%s", diff)
	}
	if r.ReasoningTokens == 0 {
		t.Errorf("no reasoning token counted")
	}

	// A malformed call fails the reply; a truncated one at max_tokens is
	// "length".
	bad := reply{frontdoor.ReplyOf(toolcall.NewParser(toolcall.FormatHermes, toolcall.Options{}))}
	bad.Push("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>", 1)
	bad.Finish()
	if _, err := bad.finishReason(&scheduler.Final{Reason: scheduler.FinishEOS}, "stop"); err == nil {
		t.Errorf("malformed call: no error")
	}
	cut := reply{frontdoor.ReplyOf(toolcall.NewParser(toolcall.FormatHermes, toolcall.Options{}))}
	cut.Push("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": ", 1)
	cut.Finish()
	if fr, err := cut.finishReason(&scheduler.Final{Reason: scheduler.FinishLength}, "length"); err != nil || fr != "length" || len(cut.message().ToolCalls) != 0 {
		t.Errorf("cut call: %q, %v, %d calls; want length, no error, none", fr, err, len(cut.message().ToolCalls))
	}
}

// TestReasoningWithTools: the R1 distills' template with enable_thinking
// (chat_template_kwargs) ends the prompt in "<think>\n", so the reply
// starts in reasoning: stories260K never closes the block, so all of it is
// reasoning_content, and every completion token a reasoning token.
func TestReasoningWithTools(t *testing.T) {
	src, err := os.ReadFile(shareddata.Path(t, "templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.New(string(src), "", "")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, false, func(d *frontdoor.Config, _ *Config) { d.Chat = tmpl })
	params := oai.ChatCompletionNewParams{
		Model:               oai.ChatModel(f.model),
		Messages:            []oai.ChatCompletionMessageParamUnion{oai.UserMessage("What is the weather in Paris?")},
		Tools:               testTools(t),
		MaxCompletionTokens: oai.Int(20),
		Temperature:         oai.Float(0),
	}
	params.SetExtraFields(map[string]any{"ignore_eos": true, "chat_template_kwargs": map[string]any{"enable_thinking": true}})
	got, err := f.client.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Content          *string `json:"content"`
		ReasoningContent string  `json:"reasoning_content"`
	}
	if err := json.Unmarshal([]byte(got.Choices[0].Message.RawJSON()), &msg); err != nil {
		t.Fatal(err)
	}
	if msg.ReasoningContent == "" || (msg.Content != nil && *msg.Content != "") {
		t.Errorf("content %v, reasoning_content %q: want all of the reply in reasoning", msg.Content, msg.ReasoningContent)
	}
	if u := got.Usage; u.CompletionTokensDetails.ReasoningTokens != u.CompletionTokens || u.CompletionTokens != 20 {
		t.Errorf("reasoning_tokens %d of %d completion tokens, want 20 of 20", u.CompletionTokensDetails.ReasoningTokens, u.CompletionTokens)
	}
	// Streamed: the same reasoning, as delta.reasoning_content.
	s := f.client.Chat.Completions.NewStreaming(t.Context(), params)
	var streamed, content strings.Builder
	for s.Next() {
		for _, c := range s.Current().Choices {
			var d struct {
				ReasoningContent string `json:"reasoning_content"`
			}
			if err := json.Unmarshal([]byte(c.Delta.RawJSON()), &d); err != nil {
				t.Fatal(err)
			}
			streamed.WriteString(d.ReasoningContent)
			content.WriteString(c.Delta.Content)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if streamed.String() != msg.ReasoningContent || content.Len() != 0 {
		t.Errorf("streamed reasoning %q, content %q; want %q, none", streamed.String(), content.String(), msg.ReasoningContent)
	}

	// Without enable_thinking the template closes the block: the reply is
	// content.
	params.SetExtraFields(map[string]any{"ignore_eos": true})
	got, err = f.client.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Choices[0].Message.Content; c == "" || got.Usage.CompletionTokensDetails.ReasoningTokens != 0 {
		t.Errorf("thinking off: content %q, %d reasoning tokens; want content, 0", c, got.Usage.CompletionTokensDetails.ReasoningTokens)
	}
}
