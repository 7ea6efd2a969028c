package openai

import (
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/toolcall"
	"github.com/weft-inference/weft/scheduler"
)

// reply is one chat choice's output read by frontdoor's Reply (content,
// reasoning and tool calls), in OpenAI's shapes.
type reply struct{ *frontdoor.Reply }

// finishReason is the choice's finish_reason given the scheduler's Final
// f and its OpenAI reason base: "tool_calls" when it stopped after
// complete calls; base otherwise ("length" for a call cut by max_tokens,
// which is left out of the message). A call the model broke otherwise
// fails the request (frontdoor.ToolCallError, a server error).
func (r reply) finishReason(f *scheduler.Final, base string) (string, error) {
	calls, err := r.Outcome(f)
	if err != nil {
		return "", err
	}
	if calls {
		return "tool_calls", nil
	}
	return base, nil
}

// message is the reply as a response message: content null when the
// reply is only calls; the calls complete by the end.
func (r reply) message() *chatOut {
	out := &chatOut{Role: "assistant", ReasoningContent: r.Reasoning()}
	for _, c := range r.Calls() {
		out.ToolCalls = append(out.ToolCalls, wireToolCall{ID: c.ID, Type: "function",
			Function: wireFunction{Name: c.Name, Arguments: c.Arguments}})
	}
	if content := r.Content(); content != "" || len(out.ToolCalls) == 0 {
		out.Content = &content
	}
	return out
}

// deltas are the stream deltas of evs, in OpenAI's shape: a call's index,
// id, type and name first (with empty arguments), then its arguments in
// fragments by index; reasoning as reasoning_content.
func deltas(evs []toolcall.Event) []chatOut {
	var out []chatOut
	for _, ev := range evs {
		switch ev.Kind {
		case toolcall.Content:
			t := ev.Text
			out = append(out, chatOut{Content: &t})
		case toolcall.Reasoning:
			out = append(out, chatOut{ReasoningContent: ev.Text})
		case toolcall.CallStart:
			i := ev.Index
			out = append(out, chatOut{ToolCalls: []wireToolCall{{Index: &i, ID: ev.ID, Type: "function",
				Function: wireFunction{Name: ev.Name}}}})
		case toolcall.CallArgs:
			i := ev.Index
			out = append(out, chatOut{ToolCalls: []wireToolCall{{Index: &i, Function: wireFunction{Arguments: ev.Text}}}})
		}
	}
	return out
}
