package frontdoor

import (
	"encoding/json"
	"log/slog"
	"os"
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
