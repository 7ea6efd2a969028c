package anthropic

import (
	"errors"
	"os"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/toolcall"
)

// The test tools. get_weather's input is bounded so that a call on
// stories260K ends within the tests' max_tokens.
const (
	weatherSchema = `{"type":"object","properties":{"city":{"type":"string","maxLength":12},` +
		`"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}`
	clockSchema = `{"type":"object","properties":{"zone":{"enum":["utc","local"]}},"required":["zone"]}`
)

func testTools() []sdk.ToolUnionParam {
	return []sdk.ToolUnionParam{
		{OfTool: &sdk.ToolParam{Name: "get_weather", Description: sdk.String("The weather in a city."),
			InputSchema: sdk.ToolInputSchemaParam{
				Properties: map[string]any{
					"city": map[string]any{"type": "string", "maxLength": 12},
					"days": map[string]any{"type": "integer", "minimum": 1, "maximum": 7},
				},
				Required:    []string{"city", "days"},
				ExtraFields: map[string]any{"additionalProperties": false},
			}}},
		{OfTool: &sdk.ToolParam{Name: "get_time",
			InputSchema: sdk.ToolInputSchemaParam{
				Properties: map[string]any{"zone": map[string]any{"enum": []string{"utc", "local"}}},
				Required:   []string{"zone"},
			}}},
	}
}

// templateFixture serves stories260K with a template of ../shared.
// stories260K's vocabulary has none of the template's special tokens: the
// markers (<tool_call>, <think>) are plain text, which the parsers read
// alike.
func templateFixture(t *testing.T, name, eos string, seed func() uint64) *fixture {
	t.Helper()
	src, err := os.ReadFile(shareddata.Path(t, "templates/"+name))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.New(string(src), "", eos)
	if err != nil {
		t.Fatal(err)
	}
	return newFixture(t, false, func(d *frontdoor.Config, c *Config) { d.Chat, c.seed = tmpl, seed })
}

// newToolFixture serves Qwen3's template (it renders tools itself, in the
// hermes format); seed gives each request's sampling seed.
func newToolFixture(t *testing.T, seed func() uint64) *fixture {
	t.Helper()
	f := templateFixture(t, "Qwen-Qwen3-0.6B.jinja", "<|im_end|>", seed)
	if got := f.h.door.Tools(); got != (frontdoor.Tools{Format: toolcall.FormatHermes, Native: true}) {
		t.Fatalf("Door.Tools() = %+v, want hermes, native", got)
	}
	return f
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

// toolUses are a message's tool_use blocks as name and input, its other
// blocks' types beside.
type toolUse struct{ Name, Input string }

func toolUses(t *testing.T, m *sdk.Message) (uses []toolUse, others []string) {
	t.Helper()
	for _, b := range m.Content {
		if b.Type != "tool_use" {
			others = append(others, b.Type)
			continue
		}
		if !strings.HasPrefix(b.ID, "toolu_") {
			t.Errorf("tool_use id %q, want toolu_...", b.ID)
		}
		uses = append(uses, toolUse{b.Name, string(b.Input)})
	}
	return uses, others
}

// checkInput checks that a tool_use names one of the tools and that its
// input validates against the tool's input_schema.
func checkInput(t *testing.T, schemas map[string]*jsonschema.Schema, u toolUse) {
	t.Helper()
	sch, ok := schemas[u.Name]
	if !ok {
		t.Fatalf("tool_use of unknown tool %q", u.Name)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(u.Input))
	if err != nil {
		t.Fatalf("%s input %q does not parse: %v", u.Name, u.Input, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("%s input %s does not validate: %v", u.Name, u.Input, err)
	}
}

// TestToolChoiceEnforced: with tool_choice any (one call) or a named tool,
// every reply of stories260K at temperature 1 over 20 seeds is one
// tool_use whose input validates against its tool's input_schema, with
// stop_reason tool_use; the stream, accumulated by the SDK's
// Message.Accumulate, gives the same tool_use.
func TestToolChoiceEnforced(t *testing.T) {
	var seed uint64
	f := newToolFixture(t, func() uint64 { return seed })
	schemas := map[string]*jsonschema.Schema{"get_weather": compileSchema(t, weatherSchema), "get_time": compileSchema(t, clockSchema)}
	for _, tc := range []struct {
		name   string
		choice sdk.ToolChoiceUnionParam
		want   string // the only tool allowed, or "" for any
	}{
		{"any", sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{DisableParallelToolUse: sdk.Bool(true)}}, ""},
		{"named", sdk.ToolChoiceParamOfTool("get_weather"), "get_weather"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed = range uint64(20) {
				params := sdk.MessageNewParams{
					Model:      sdk.Model(f.model),
					Messages:   []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("What is the weather in Paris?"))},
					Tools:      testTools(),
					ToolChoice: tc.choice,
					MaxTokens:  400,
				}
				got, err := f.client.Messages.New(t.Context(), params, option.WithJSONSet("temperature", 1))
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				uses, others := toolUses(t, got)
				if got.StopReason != "tool_use" || len(uses) != 1 || len(others) != 0 {
					t.Fatalf("seed %d: stop_reason %q, tool_uses %v, other blocks %v; want tool_use, one, none", seed, got.StopReason, uses, others)
				}
				if tc.want != "" && uses[0].Name != tc.want {
					t.Fatalf("seed %d: called %q, want %q", seed, uses[0].Name, tc.want)
				}
				checkInput(t, schemas, uses[0])

				s := f.client.Messages.NewStreaming(t.Context(), params, option.WithJSONSet("temperature", 1))
				var acc sdk.Message
				var deltas []string
				for s.Next() {
					ev := s.Current()
					if ev.Type == "content_block_delta" {
						deltas = append(deltas, ev.Delta.Type)
					}
					if err := acc.Accumulate(ev); err != nil {
						t.Fatalf("seed %d: accumulate: %v", seed, err)
					}
				}
				if err := s.Err(); err != nil {
					t.Fatalf("seed %d: stream: %v", seed, err)
				}
				streamed, _ := toolUses(t, &acc)
				if diff := cmp.Diff([]any{"tool_use", uses}, []any{string(acc.StopReason), streamed}); diff != "" {
					t.Errorf("seed %d: streamed (-non-streamed +streamed):\n%s", seed, diff)
				}
				if len(deltas) == 0 || deltas[0] != "input_json_delta" {
					t.Errorf("seed %d: deltas %v, want input_json_delta", seed, deltas)
				}
				if acc.Usage.OutputTokens != got.Usage.OutputTokens || acc.Usage.InputTokens != got.Usage.InputTokens {
					t.Errorf("seed %d: streamed usage %+v, non-streamed %+v", seed, acc.Usage, got.Usage)
				}
			}
		})
	}
}

// TestToolResultRoundTrip: a tool_use, its tool_result (once as an error),
// and the next reply; the history reaches Qwen3's template, which renders
// the call and its result its own way. count_tokens counts the same
// prompt.
func TestToolResultRoundTrip(t *testing.T) {
	f := newToolFixture(t, func() uint64 { return 7 })
	ctx := t.Context()
	user := sdk.NewUserMessage(sdk.NewTextBlock("What is the weather in Paris?"))
	first, err := f.client.Messages.New(ctx, sdk.MessageNewParams{
		Model:      sdk.Model(f.model),
		Messages:   []sdk.MessageParam{user},
		Tools:      testTools(),
		ToolChoice: sdk.ToolChoiceParamOfTool("get_weather"),
		MaxTokens:  400,
	})
	if err != nil {
		t.Fatal(err)
	}
	uses, _ := toolUses(t, first)
	if len(uses) != 1 {
		t.Fatalf("first reply: %d tool_uses", len(uses))
	}
	id := first.Content[len(first.Content)-1].ID
	for _, isError := range []bool{false, true} {
		msgs := []sdk.MessageParam{user, first.ToParam(),
			sdk.NewUserMessage(sdk.NewToolResultBlock(id, `{"temperature": 21}`, isError), sdk.NewTextBlock("And tomorrow?"))}
		params := sdk.MessageNewParams{Model: sdk.Model(f.model), Messages: msgs, Tools: testTools(), MaxTokens: 20}
		second, err := f.client.Messages.New(ctx, params, greedy)
		if err != nil {
			t.Fatalf("is_error %v: %v", isError, err)
		}
		if second.StopReason != "end_turn" && second.StopReason != "max_tokens" {
			t.Errorf("is_error %v: stop_reason %q", isError, second.StopReason)
		}
		// The second prompt holds the first's (the same tools and
		// question) and the call and its result: the prefix cache serves
		// the first prompt's full blocks.
		if second.Usage.InputTokens <= first.Usage.InputTokens+10 || second.Usage.CacheReadInputTokens == 0 {
			t.Errorf("is_error %v: input %d tokens (%d from the cache), first %d: want the history grown and cached",
				isError, second.Usage.InputTokens, second.Usage.CacheReadInputTokens, first.Usage.InputTokens)
		}
		count, err := f.client.Messages.CountTokens(ctx, sdk.MessageCountTokensParams{Model: sdk.Model(f.model), Messages: msgs,
			Tools: []sdk.MessageCountTokensToolUnionParam{{OfTool: testTools()[0].OfTool}, {OfTool: testTools()[1].OfTool}}})
		if err != nil {
			t.Fatal(err)
		}
		if count.InputTokens != second.Usage.InputTokens {
			t.Errorf("is_error %v: count_tokens %d, input_tokens %d", isError, count.InputTokens, second.Usage.InputTokens)
		}
	}
}

// TestThinking: DeepSeek R1's template with thinking enabled opens the
// reasoning block in the prompt, so the reply is a thinking block
// (stories260K never closes it), streamed as thinking_delta; disabled,
// the template closes the block and the reply is text. The thinking block
// goes back in the history of the next turn.
func TestThinking(t *testing.T) {
	f := templateFixture(t, "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "", nil)
	ctx := t.Context()
	params := f.params(20)
	params.System = nil
	params.Thinking = sdk.ThinkingConfigParamOfEnabled(10)
	got, err := f.client.Messages.New(ctx, params, greedy)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Content) != 1 || got.Content[0].Type != "thinking" || got.Content[0].Thinking == "" {
		t.Fatalf("content %+v: want one thinking block", got.Content)
	}
	s := f.client.Messages.NewStreaming(ctx, params, greedy)
	var acc sdk.Message
	var deltas []string
	for s.Next() {
		ev := s.Current()
		if ev.Type == "content_block_delta" && (len(deltas) == 0 || deltas[len(deltas)-1] != ev.Delta.Type) {
			deltas = append(deltas, ev.Delta.Type)
		}
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"thinking_delta"}, deltas); diff != "" {
		t.Errorf("stream deltas (-want +got):\n%s", diff)
	}
	if len(acc.Content) != 1 || acc.Content[0].Thinking != got.Content[0].Thinking {
		t.Errorf("streamed content %+v, want the thinking %q", acc.Content, got.Content[0].Thinking)
	}

	// The thinking block in the history is accepted and rendered.
	next := params
	next.Messages = append(params.Messages, got.ToParam(), sdk.NewUserMessage(sdk.NewTextBlock("Go on.")))
	if _, err := f.client.Messages.New(ctx, next, greedy); err != nil {
		t.Fatalf("thinking block in the history: %v", err)
	}

	params.Thinking = sdk.ThinkingConfigParamUnion{OfDisabled: &sdk.ThinkingConfigDisabledParam{}}
	off, err := f.client.Messages.New(ctx, params, greedy)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range off.Content {
		if b.Type != "text" {
			t.Errorf("thinking disabled: a %s block", b.Type)
		}
	}
}

// TestToolErrors: refusals of tool and thinking requests, Anthropic's
// error type and the field in the message.
func TestToolErrors(t *testing.T) {
	f := newToolFixture(t, nil)
	tool := map[string]any{"name": "get_weather", "input_schema": map[string]any{"type": "object"}}
	for _, tc := range []struct {
		name string
		opts []option.RequestOption
		has  string
	}{
		{"malformed input_schema", []option.RequestOption{option.WithJSONSet("tools", []map[string]any{
			{"name": "f", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "integer", "minimum": "x"}}}}})},
			"tools[0].input_schema"},
		{"no input_schema", []option.RequestOption{option.WithJSONSet("tools", []map[string]any{{"name": "f"}})}, "tools[0].input_schema"},
		{"bad tool name", []option.RequestOption{option.WithJSONSet("tools", []map[string]any{{"name": "a b", "input_schema": map[string]any{"type": "object"}}})},
			"tools[0].name"},
		{"server tool", []option.RequestOption{option.WithJSONSet("tools", []map[string]any{{"type": "web_search_20250305", "name": "web_search"}})},
			"tools[0].type"},
		{"unknown named tool", []option.RequestOption{option.WithJSONSet("tools", []any{tool}),
			option.WithJSONSet("tool_choice", map[string]any{"type": "tool", "name": "nope"})}, "tool_choice"},
		{"any without tools", []option.RequestOption{option.WithJSONSet("tool_choice", map[string]any{"type": "any"})}, "tool_choice"},
		{"thinking with any", []option.RequestOption{option.WithJSONSet("tools", []any{tool}),
			option.WithJSONSet("tool_choice", map[string]any{"type": "any"}),
			option.WithJSONSet("thinking", map[string]any{"type": "enabled", "budget_tokens": 4})}, "tool_choice"},
		{"budget not below max_tokens", []option.RequestOption{
			option.WithJSONSet("thinking", map[string]any{"type": "enabled", "budget_tokens": 8})}, "thinking.budget_tokens"},
		{"tool_use in a user message", []option.RequestOption{option.WithJSONSet("messages", []map[string]any{{"role": "user",
			"content": []map[string]any{{"type": "tool_use", "id": "toolu_1", "name": "f", "input": map[string]any{}}}}})},
			"messages[0].content[0].type"},
		{"tool_use input not an object", []option.RequestOption{option.WithJSONSet("messages", []map[string]any{
			{"role": "user", "content": "hi"},
			{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": "toolu_1", "name": "f", "input": []int{1}}}}})},
			"messages[1].content[0].input"},
		{"control token text in a tool_use input", []option.RequestOption{option.WithJSONSet("messages", []map[string]any{
			{"role": "user", "content": "hi"},
			{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": "toolu_1", "name": "f", "input": map[string]any{"a": "</s>"}}}},
			{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"}}}})},
			"messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.client.Messages.New(t.Context(), f.params(8), tc.opts...)
			var apiErr *sdk.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want *anthropic.Error", err)
			}
			got := []any{apiErr.StatusCode, string(apiErr.Type()), strings.HasPrefix(apiErr.Message, tc.has)}
			if diff := cmp.Diff([]any{400, "invalid_request_error", true}, got); diff != "" {
				t.Errorf("status, type, message starts with %q (-want +got):\n%s\nmessage: %s", tc.has, diff, apiErr.Message)
			}
		})
	}
}
