package frontdoor

import (
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/toolcall"
	"github.com/weft-inference/weft/scheduler"
)

// TestToolSpec: the checks every door's tools get, each refusal naming
// its field (OpenAI's names, which a door renames); a definition without
// Definition reaches the template in OpenAI's function shape.
func TestToolSpec(t *testing.T) {
	d := newDoor(t, 100, 0)
	obj := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`)
	f := ToolDef{Name: "f", Description: "does f", Parameters: obj}
	for _, tc := range []struct {
		name   string
		defs   []ToolDef
		choice ToolChoice
		named  string
		field  string // "" for accepted
	}{
		{"auto", []ToolDef{f}, ToolChoiceAuto, "", ""},
		{"no tools, auto", nil, ToolChoiceAuto, "", ""},
		{"no tools, required", nil, ToolChoiceRequired, "", "tool_choice"},
		{"bad name", []ToolDef{f, {Name: "a b"}}, ToolChoiceAuto, "", "tools[1].function.name"},
		{"twice", []ToolDef{f, f}, ToolChoiceAuto, "", "tools[1].function.name"},
		{"schema not an object", []ToolDef{{Name: "g", Parameters: json.RawMessage(`[1]`)}}, ToolChoiceAuto, "", "tools[0].function.parameters"},
		{"schema that does not compile", []ToolDef{{Name: "g", Parameters: json.RawMessage(`{"type":"integer","minimum":"x"}`)}},
			ToolChoiceAuto, "", "tools[0].function.parameters"},
		{"unknown named tool", []ToolDef{f}, ToolChoiceNamed, "g", "tool_choice"},
	} {
		s, err := d.ToolSpec(tc.defs, tc.choice, tc.named, true)
		var fe *FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%s: %v, want a FieldError for %s", tc.name, err, tc.field)
		case tc.field == "" && len(tc.defs) > 0 && !s.Parse():
			t.Errorf("%s: the reply would not be parsed", tc.name)
		}
	}
	s, err := d.ToolSpec([]ToolDef{f}, ToolChoiceAuto, "", true)
	if err != nil {
		t.Fatal(err)
	}
	want := json.RawMessage(`{"type":"function","function":{"name":"f","description":"does f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}`)
	if diff := cmp.Diff([]json.RawMessage{want}, s.Defs); diff != "" {
		t.Errorf("definitions (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		choice        ToolChoice
		parse, forced bool
	}{
		{ToolChoiceAuto, true, false}, {ToolChoiceNone, false, false},
		{ToolChoiceRequired, true, true}, {ToolChoiceNamed, true, true},
	} {
		s, err := d.ToolSpec([]ToolDef{f}, tc.choice, "f", true)
		if err != nil || s.Parse() != tc.parse || s.Forced() != tc.forced {
			t.Errorf("%v: parse %v, forced %v (%v); want %v, %v", tc.choice, s.Parse(), s.Forced(), err, tc.parse, tc.forced)
		}
	}
	var none *ToolSpec
	if none.Parse() || none.Forced() {
		t.Errorf("nil spec: parse %v, forced %v", none.Parse(), none.Forced())
	}
}

// hermesDoor is a Door whose replies are read in the hermes format.
func hermesDoor(t *testing.T) *Door {
	t.Helper()
	d, err := New(Config{Tokenizer: byteTok{}, ToolFormat: "hermes", Logger: slog.New(slog.DiscardHandler),
		Limits: scheduler.Limits{ContextLen: 100, MaxPromptTokens: 99, MaxTokens: 100, DefaultMaxTokens: 16}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestReplyOutcome: how a parsed reply ends for each scheduler reason;
// its reasoning, the prompt that opens it, and a door's options.
func TestReplyOutcome(t *testing.T) {
	d := hermesDoor(t)
	s, err := d.ToolSpec([]ToolDef{{Name: "f"}}, ToolChoiceAuto, "", true)
	if err != nil {
		t.Fatal(err)
	}
	const call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"
	const cut = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": "
	const broken = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>"
	type ended struct {
		Calls, CallErr bool
		N              int
	}
	for _, tc := range []struct {
		name   string
		text   string
		reason scheduler.FinishReason
		want   ended
	}{
		{"call, end of turn", call, scheduler.FinishEOS, ended{true, false, 1}},
		{"call, stop string", call, scheduler.FinishStopSequence, ended{true, false, 1}},
		{"call, max_tokens", call, scheduler.FinishLength, ended{false, false, 1}},
		{"text", "Sure.", scheduler.FinishEOS, ended{false, false, 0}},
		{"cut by max_tokens", cut, scheduler.FinishLength, ended{false, false, 0}},
		{"cut, end of turn", cut, scheduler.FinishEOS, ended{false, true, 0}},
		{"malformed", broken, scheduler.FinishEOS, ended{false, true, 0}},
	} {
		r := d.NewReply(s, nil, ReplyOptions{})
		r.Push(tc.text, 1)
		r.Finish()
		calls, err := r.Outcome(&scheduler.Final{Reason: tc.reason})
		var ce *ToolCallError
		got := ended{calls, errors.As(err, &ce), len(r.Calls())}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	thinking := byteTok{}.Encode("<|im_start|>assistant\n<think>\n", false, false)
	plain := byteTok{}.Encode("<|im_start|>assistant\n", false, false)
	if !d.OpensReasoning(thinking) || d.OpensReasoning(plain) {
		t.Errorf("OpensReasoning does not read the prompt's tail")
	}
	// Without tools a reply is read only for a door that asks for its
	// reasoning; a prompt that opened the block starts it there, and the
	// door's ids name the calls.
	if r := d.NewReply(nil, thinking, ReplyOptions{}); r != nil {
		t.Errorf("no tools, no reasoning asked: a reply reader")
	}
	r := d.NewReply(nil, thinking, ReplyOptions{Reasoning: true, NewID: func() string { return "id1" }})
	r.Push("hmm", 2)
	r.Push("</think>\n\nSure.\n"+call, 3)
	r.Finish()
	got := []any{r.Reasoning(), r.Content(), r.ReasoningTokens, r.Calls()}
	want := []any{"hmm", "Sure.", 2, []chat.ToolCall{{ID: "id1", Name: "f", Arguments: `{"a": 1}`}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reasoning, content, reasoning tokens, calls (-want +got):\n%s", diff)
	}
	// A forced call does not start in reasoning, whatever the prompt.
	named, err := d.ToolSpec([]ToolDef{{Name: "f"}}, ToolChoiceNamed, "f", false)
	if err != nil {
		t.Fatal(err)
	}
	r = d.NewReply(named, thinking, ReplyOptions{Reasoning: true})
	r.Push(call, 1)
	r.Finish()
	if r.Reasoning() != "" || len(r.Calls()) != 1 {
		t.Errorf("named tool after an opened block: reasoning %q, %d calls; want none, 1", r.Reasoning(), len(r.Calls()))
	}
	if toolcall.FormatHermes != d.Tools().Format {
		t.Errorf("format %v", d.Tools().Format)
	}
}

// TestTokenizeDetokenize: the checks of every door's tokenize endpoints.
func TestTokenizeDetokenize(t *testing.T) {
	d := newDoor(t, 100, 8)
	ctx := t.Context()
	ids, err := d.Tokenize(ctx, "text", "ab", false, false)
	if err != nil || !cmp.Equal(ids, []int32{'a' + 3, 'b' + 3}) {
		t.Errorf("Tokenize = %v, %v", ids, err)
	}
	if _, err := d.Tokenize(ctx, "text", "a\xff", false, false); !errors.As(err, new(*UTF8Error)) || !errors.Is(err, scheduler.ErrInvalidRequest) {
		t.Errorf("invalid UTF-8: %v", err)
	}
	var be *BytesError
	if _, err := d.Tokenize(ctx, "text", "123456789", false, false); !errors.As(err, &be) || be.Field != "text" {
		t.Errorf("over MaxPromptBytes: %v", err)
	}
	if s, err := d.Detokenize("tokens", ids); err != nil || s != "ab" {
		t.Errorf("Detokenize = %q, %v", s, err)
	}
	var le *scheduler.LimitError
	if _, err := d.Detokenize("tokens", []int32{3, 259}); !errors.As(err, &le) || le.Field != "tokens" || !errors.Is(err, scheduler.ErrTokenOutOfRange) {
		t.Errorf("out of the vocabulary: %v", err)
	}
	// ChatTokens: the generation prompt adds to the conversation's tokens.
	d = newDoor(t, 100, 0)
	msgs := []chat.Message{{Role: "user", Content: "hi"}}
	with, err := d.ChatTokens(ctx, msgs, true)
	if err != nil {
		t.Fatal(err)
	}
	_, prompt, err := d.ChatPrompt(ctx, msgs, 0, Reject)
	if err != nil || !cmp.Equal(with, prompt) {
		t.Errorf("ChatTokens %v, ChatPrompt %v (%v): want the same", with, prompt, err)
	}
	without, err := d.ChatTokens(ctx, msgs, false)
	if err != nil || len(without) >= len(with) || !cmp.Equal(without, with[:len(without)]) {
		t.Errorf("without the generation prompt %v, with %v: want a proper prefix", without, with)
	}
}
