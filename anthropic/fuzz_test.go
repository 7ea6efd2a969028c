package anthropic

import (
	"errors"
	"log/slog"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/tokenizer"
	"github.com/weft-inference/weft/scheduler"
)

// byteTok is a Tokenizer of one token per byte, enough for a Door that
// checks tools (the fuzzed decoder renders nothing).
type byteTok struct{}

func (byteTok) Encode(text string, _, _ bool) []int32 {
	ids := make([]int32, len(text))
	for i := range len(text) {
		ids[i] = int32(text[i])
	}
	return ids
}

func (t byteTok) EncodeSegments(segs []tokenizer.Segment, addSpecial bool) []int32 {
	var ids []int32
	for _, s := range segs {
		ids = append(ids, t.Encode(s.Text, addSpecial, s.ParseSpecial)...)
	}
	return ids
}

func (byteTok) Decode(ids []int32) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}

func (byteTok) VocabSize() int { return 256 }

// FuzzDecode feeds outside bytes to the request decoder and the
// conversation and tool checks: never a panic; an error is a 400
// requestError; an accepted conversation has valid UTF-8 contents and only
// user, assistant and tool turns after at most one leading system message,
// each tool turn answering a call of an earlier assistant turn.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":8,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"x","name":"f","input":{}}]}]}`,
		`{"model":"m","max_tokens":8,"tools":[],"messages":[]}`,
		`{"messages":[{"role":"user","content":[{"type":"text"}]}]}`,
		`{"system":7,"messages":[{"role":"user","content":null}]}`,
		`{"messages":[{"role":"user","content":"\ud800"}]}`,
		`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"a"},{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"r"}],"is_error":true},{"type":"text","text":"more"}]}]}`,
		`{"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true},"thinking":{"type":"enabled","budget_tokens":4},"messages":[{"role":"user","content":"x"}]}`,
		`[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	door, err := frontdoor.New(frontdoor.Config{Tokenizer: byteTok{}, Limits: scheduler.Limits{ContextLen: 64},
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	h := &Handler{door: door}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeRequest(body)
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) || re.status != 400 {
				t.Fatalf("decode error %v is not a 400 requestError", err)
			}
			return
		}
		var v chat.Vars
		if _, err = h.toolSpecOf(req); err == nil {
			_, err = thinkingOf(req, &v)
		}
		if err != nil {
			if e := apiErrorOf(err); e.status != 400 || e.Type != "invalid_request_error" {
				t.Fatalf("tools or thinking error %v is %d %s, want 400 invalid_request_error", err, e.status, e.Type)
			}
		}
		msgs, err := conversation(req)
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) || re.status != 400 {
				t.Fatalf("conversation error %v is not a 400 requestError", err)
			}
			return
		}
		calls := map[string]bool{}
		for i, m := range msgs {
			if !utf8.ValidString(m.Content) || !utf8.ValidString(m.ReasoningContent) {
				t.Errorf("message %d: content not valid UTF-8", i)
			}
			switch {
			case m.Role == "system" && i != 0,
				m.Role != "system" && m.Role != "user" && m.Role != "assistant" && m.Role != "tool":
				t.Errorf("message %d: role %q", i, m.Role)
			case m.Role == "tool" && !calls[m.ToolCallID]:
				t.Errorf("message %d answers %q, no earlier call", i, m.ToolCallID)
			}
			for _, c := range m.ToolCalls {
				calls[c.ID] = true
			}
		}
	})
}
