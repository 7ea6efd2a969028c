package frontdoor

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/toolcall"
	"github.com/weft-inference/weft/scheduler"
)

// TestTools: the format is detected from a template that renders tools,
// generic for one that does not, and the operator's ToolFormat wins.
func TestTools(t *testing.T) {
	src, err := os.ReadFile(shareddata.Path(t, "templates/Qwen-Qwen3-0.6B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	qwen, err := chat.New(string(src), "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	chatml, err := chat.Fallback("chatml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		tmpl   ChatRenderer
		format string
		want   Tools
	}{
		{"qwen3", qwen, "", Tools{Format: toolcall.FormatHermes, Native: true}},
		{"chatml", chatml, "", Tools{Format: toolcall.FormatGeneric}},
		{"qwen3, overridden", qwen, "llama3", Tools{Format: toolcall.FormatLlama3, Native: true}},
		{"no template", nil, "", Tools{Format: toolcall.FormatGeneric}},
	} {
		d, err := New(Config{Tokenizer: byteTok{}, Chat: tc.tmpl, ToolFormat: tc.format, Logger: slog.New(slog.DiscardHandler),
			Limits: scheduler.Limits{ContextLen: 100, MaxPromptTokens: 99, MaxTokens: 100, DefaultMaxTokens: 16}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, d.Tools()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	if _, err := New(Config{Tokenizer: byteTok{}, ToolFormat: "nope",
		Limits: scheduler.Limits{ContextLen: 100, MaxPromptTokens: 99, MaxTokens: 100, DefaultMaxTokens: 16}}); err == nil {
		t.Errorf("ToolFormat nope: no error")
	}
}

func TestGenericToolMessages(t *testing.T) {
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "f"}}`)}
	prompt := GenericToolPrompt(tools)
	in := []chat.Message{
		{Role: "user", Content: "hi"},
		{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "f", Arguments: `{"a": 1}`}}},
		{Role: "tool", ToolCallID: "call_1", Name: "f", Content: "42"},
	}
	want := []chat.Message{
		{Role: "system", Content: prompt},
		{Role: "user", Content: "hi"},
		{Role: "assistant", Content: `{"tool_calls":[{"name":"f","arguments":{"a":1}}]}`},
		{Role: "user", Content: "Result of tool call call_1 (f):\n42"},
	}
	if diff := cmp.Diff(want, GenericToolMessages(in, tools)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// A system message of the conversation's own follows the tool prompt.
	got := GenericToolMessages([]chat.Message{{Role: "system", Content: "Be brief."}}, tools)
	if diff := cmp.Diff([]chat.Message{{Role: "system", Content: prompt + "\n\nBe brief."}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The generic parser reads the shape the prompt asks for.
	p := toolcall.NewParser(toolcall.FormatGeneric, toolcall.Options{})
	evs := p.Push(`{"tool_calls": [{"name": "f", "arguments": {"a": 1}}]}`)
	end, err := p.Finish()
	if err != nil || len(append(evs, end...)) == 0 || evs[0].Kind != toolcall.CallStart {
		t.Errorf("generic parse: %v %+v", err, evs)
	}
}

// TestCheckToolMessages: calls only on assistant messages, with an id, a
// function name and JSON arguments (compacted); a tool result names an
// earlier call; messages before from are not checked again.
func TestCheckToolMessages(t *testing.T) {
	call := func(id, args string) []chat.ToolCall { return []chat.ToolCall{{ID: id, Name: "f", Arguments: args}} }
	for _, tc := range []struct {
		name  string
		msgs  []chat.Message
		from  int
		field string // "" for no error
	}{
		{"ok", []chat.Message{{Role: "user"}, {Role: "assistant", ToolCalls: call("c1", `{"a": 1}`)}, {Role: "tool", ToolCallID: "c1"}}, 0, ""},
		{"result of a later turn", []chat.Message{{Role: "assistant", ToolCalls: call("c1", "{}")}, {Role: "tool", ToolCallID: "c1"}}, 1, ""},
		{"unknown call", []chat.Message{{Role: "assistant", ToolCalls: call("c1", "{}")}, {Role: "tool", ToolCallID: "c2"}}, 1, "messages[1].tool_call_id"},
		{"calls on a user message", []chat.Message{{Role: "user", ToolCalls: call("c1", "{}")}}, 0, "messages[0].tool_calls"},
		{"no id", []chat.Message{{Role: "assistant", ToolCalls: call("", "{}")}}, 0, "messages[0].tool_calls[0].id"},
		{"bad name", []chat.Message{{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c", Name: "a b"}}}}, 0, "messages[0].tool_calls[0].function.name"},
		{"arguments not JSON", []chat.Message{{Role: "assistant", ToolCalls: call("c", "{")}}, 0, "messages[0].tool_calls[0].function.arguments"},
		{"earlier messages not checked", []chat.Message{{Role: "assistant", ToolCalls: call("c", "{")}, {Role: "user"}}, 1, ""},
	} {
		err := CheckToolMessages(tc.msgs, tc.from)
		var fe *FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%s: %v, want a FieldError for %s", tc.name, err, tc.field)
		}
	}
	msgs := []chat.Message{{Role: "assistant", ToolCalls: call("c", "{ \"a\" : [1, 2] }")}}
	if err := CheckToolMessages(msgs, 0); err != nil || msgs[0].ToolCalls[0].Arguments != `{"a":[1,2]}` {
		t.Errorf("arguments %q, %v; want them compacted", msgs[0].ToolCalls[0].Arguments, err)
	}
}

// TestChatPromptToolsGeneric: on a template without tools, the prompt
// holds the tool prompt and the calls as text, while the messages
// returned (what a door keeps as the conversation) are the ones given.
func TestChatPromptToolsGeneric(t *testing.T) {
	chatml, err := chat.Fallback("chatml")
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Tokenizer: byteTok{}, Chat: chatml, Logger: slog.New(slog.DiscardHandler),
		Limits: scheduler.Limits{ContextLen: 4000, MaxPromptTokens: 3999, MaxTokens: 4000, DefaultMaxTokens: 16}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.ToolSpec([]ToolDef{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}}, ToolChoiceAuto, "", true)
	if err != nil {
		t.Fatal(err)
	}
	in := []chat.Message{
		{Role: "user", Content: "hi"},
		{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "f", Arguments: `{}`}}},
		{Role: "tool", ToolCallID: "c1", Content: "42"},
	}
	got, prompt, err := d.ChatPromptTools(t.Context(), in, 2, Reject, chat.Vars{}, s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, got); diff != "" {
		t.Errorf("messages returned (-given +got):\n%s", diff)
	}
	var b []byte
	for _, id := range prompt[1:] { // after BOS
		b = append(b, byte(id-3))
	}
	text := string(b)
	for _, want := range []string{"You can call these tools", `{"tool_calls":[{"name":"f","arguments":{}}]}`, "Result of tool call c1"} {
		if !strings.Contains(text, want) {
			t.Errorf("prompt %q lacks %q", text, want)
		}
	}
}
