package openai

import (
	"errors"
	"strings"

	"github.com/weft-inference/weft/runtime/toolcall"
)

// reply is one chat choice's output read by a toolcall.Parser: content,
// reasoning and tool calls, as the handler goroutine assembles them.
type reply struct {
	p         *toolcall.Parser
	content   strings.Builder
	reasoning strings.Builder
	calls     []replyCall
	err       error // the parser's *toolcall.CallError, once Finish returned it
	// reasoningTokens counts the tokens whose text left the parser inside
	// reasoning (usage.completion_tokens_details.reasoning_tokens).
	reasoningTokens int
}

type replyCall struct {
	id, name string
	args     strings.Builder
	done     bool // its CallEnd came: the arguments are complete and parse
}

func newReply(s *toolSpec) *reply {
	return &reply{p: toolcall.NewParser(s.door.Format, toolcall.Options{Tools: s.tools, InReasoning: s.inReasoning})}
}

// push feeds the text of an event (written by tokens tokens) and returns
// the parser's events.
func (r *reply) push(text string, tokens int) []toolcall.Event {
	evs := r.p.Push(text)
	if r.p.Reasoning() {
		r.reasoningTokens += tokens
	}
	r.apply(evs)
	return evs
}

// finish ends the reply and returns the last events.
func (r *reply) finish() []toolcall.Event {
	evs, err := r.p.Finish()
	r.err = err
	r.apply(evs)
	return evs
}

func (r *reply) apply(evs []toolcall.Event) {
	for _, ev := range evs {
		switch ev.Kind {
		case toolcall.Content:
			r.content.WriteString(ev.Text)
		case toolcall.Reasoning:
			r.reasoning.WriteString(ev.Text)
		case toolcall.CallStart:
			r.calls = append(r.calls, replyCall{id: ev.ID, name: ev.Name})
		case toolcall.CallArgs:
			if ev.Index < len(r.calls) {
				r.calls[ev.Index].args.WriteString(ev.Text)
			}
		case toolcall.CallEnd:
			if ev.Index < len(r.calls) {
				r.calls[ev.Index].done = true
			}
		}
	}
}

// finishReason is the choice's finish_reason given the scheduler's
// (base): "tool_calls" when it stopped after complete calls; "length" for
// a call cut by max_tokens (the cut call is left out of the message). A
// call the model broke otherwise fails the request (err): without a
// grammar enforcing the syntax the model can write a malformed call, and
// arguments that do not parse are not handed to the client.
func (r *reply) finishReason(base string) (string, error) {
	if r.err != nil {
		var ce *toolcall.CallError
		if errors.As(r.err, &ce) && ce.Truncated && base == "length" {
			return "length", nil
		}
		return "", &modelFormatError{err: r.err}
	}
	if base == "stop" && len(r.calls) > 0 {
		return "tool_calls", nil
	}
	return base, nil
}

// modelFormatError is a reply whose tool call broke the model's format: a
// server error (500) naming the call and the reason.
type modelFormatError struct{ err error }

func (e *modelFormatError) Error() string {
	return "the model wrote a malformed tool call: " + e.err.Error()
}
func (e *modelFormatError) Unwrap() error { return e.err }

// message is the reply as a response message: content null when the
// reply is only calls; the calls complete by the end.
func (r *reply) message() *chatOut {
	out := &chatOut{Role: "assistant", ReasoningContent: r.reasoning.String()}
	for _, c := range r.calls {
		if !c.done {
			continue
		}
		out.ToolCalls = append(out.ToolCalls, wireToolCall{ID: c.id, Type: "function",
			Function: wireFunction{Name: c.name, Arguments: c.args.String()}})
	}
	if content := r.content.String(); content != "" || len(out.ToolCalls) == 0 {
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
