package frontdoor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/constrain"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/runtime/toolcall"
	"github.com/weft-inference/weft/scheduler"
)

// A request's tools, as every door handles them (OpenAI's tools,
// tool_choice and parallel_tool_calls; the gRPC ChatTurn's tools;
// Anthropic's tools and tool_choice auto, any, tool and none, which are
// ToolChoiceAuto, Required, Named and None).
//
// The tools go to the chat template (chat.Vars.Tools) when it renders
// tools itself (Tools.Native); otherwise a system message describes them
// and asks for toolcall's generic JSON shape (GenericToolMessages). The
// reply is read by a toolcall.Parser in the Door's format (Reply) into
// content, reasoning and tool calls; a door with a place of its own for
// reasoning (Anthropic's thinking blocks) has the reply read for it even
// without tools (ReplyOptions.Reasoning).
//
// Tool choice:
//   - ToolChoiceAuto (the default with tools): free decoding, parsed.
//   - ToolChoiceNone: the tools are not rendered and the reply is not
//     parsed for calls: it is all content. (OpenAI shows the tools to the
//     model and never calls; not rendering them is the simplest way to
//     never call.)
//   - ToolChoiceRequired, or ToolChoiceNamed: decoding is constrained from
//     the first token to the format's call syntax (toolcall.CallSyntax's
//     GBNF, compiled by runtime/constrain through the Door's cache): one
//     or more calls of any tool (Parallel), or exactly one call of the
//     named tool. Each call's arguments are constrained to its tool's JSON
//     Schema (constrain.CompileGBNFSchemas defines the grammar's argument
//     rules by the schemas), so they parse and validate. Formats whose
//     arguments are text (qwen3-coder, deepseek-dsml) have no such syntax:
//     there decoding runs free, parsed as with auto.
//
// Each tool's parameters must be a JSON Schema runtime/constrain compiles;
// a tool message's tool_call_id must name a call of an earlier assistant
// message. Both are *FieldErrors naming the field.

// ToolChoice says whether, and which, tools a reply calls.
type ToolChoice uint8

const (
	// ToolChoiceAuto lets the model choose between an answer and calls.
	ToolChoiceAuto ToolChoice = iota
	// ToolChoiceNone never calls: the tools are not rendered.
	ToolChoiceNone
	// ToolChoiceRequired makes the reply one or more calls (one unless
	// ToolSpec.Parallel).
	ToolChoiceRequired
	// ToolChoiceNamed makes the reply exactly one call of ToolSpec.Named.
	ToolChoiceNamed
)

func (c ToolChoice) String() string {
	switch c {
	case ToolChoiceAuto:
		return "auto"
	case ToolChoiceNone:
		return "none"
	case ToolChoiceRequired:
		return "required"
	case ToolChoiceNamed:
		return "function"
	}
	return fmt.Sprintf("ToolChoice(%d)", uint8(c))
}

// ToolDef is one function tool as a door decoded it.
type ToolDef struct {
	Name        string
	Description string
	// Parameters is the tool's JSON Schema; empty (or JSON null) means
	// any object.
	Parameters json.RawMessage
	// Definition is the tool as the chat template gets it, OpenAI's
	// {"type": "function", "function": {...}} (the HTTP door passes the
	// client's own). Nil: built from the fields above.
	Definition json.RawMessage
}

// FieldError is a request field refused by this package's checks of tools,
// tool choice and the tool calls and results of a conversation. Field is
// the neutral name, OpenAI's ("tools[1].function.parameters",
// "tool_choice", "messages[2].tool_call_id"); a door renames it.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ToolSpec is a request's tools, checked (Door.ToolSpec).
type ToolSpec struct {
	// Defs are the tool definitions the template gets.
	Defs []json.RawMessage
	// Tools are the tools as the parser and the grammar know them.
	Tools    []toolcall.Tool
	Choice   ToolChoice
	Named    string // the tool of ToolChoiceNamed
	Parallel bool   // more than one call in a reply (required)
}

// Parse reports whether the reply is parsed for calls: there are tools
// and the choice is not none. A nil spec parses nothing.
func (s *ToolSpec) Parse() bool { return s != nil && len(s.Tools) > 0 && s.Choice != ToolChoiceNone }

// Forced reports whether the grammar makes the reply a call from its
// first token (ToolChoiceRequired or ToolChoiceNamed). A nil spec forces
// nothing.
func (s *ToolSpec) Forced() bool {
	return s != nil && (s.Choice == ToolChoiceRequired || s.Choice == ToolChoiceNamed)
}

// ValidToolName reports whether s is a function name OpenAI accepts (and
// the parsers read as one): 1 to 64 letters, digits, '_', '-', '.' or ':'.
func ValidToolName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':'
		if !ok {
			return false
		}
	}
	return true
}

// FunctionDefinition is a tool in OpenAI's shape, {"type": "function",
// "function": {"name", "description", "parameters"}}, as chat templates
// read tools (Hugging Face's convention).
func FunctionDefinition(name, description string, parameters json.RawMessage) json.RawMessage {
	type fn struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	}
	b, _ := json.Marshal(struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}{"function", fn{name, description, parameters}}) // cannot fail: parameters are checked JSON
	return b
}

// ToolSpec checks a request's tools and tool choice: each name valid and
// given once, each parameters a JSON Schema object that runtime/constrain
// compiles, a named choice one of the tools. No tools gives a nil spec
// (with choice auto or none; required or named then needs tools).
func (d *Door) ToolSpec(defs []ToolDef, choice ToolChoice, named string, parallel bool) (*ToolSpec, error) {
	if len(defs) == 0 {
		if choice == ToolChoiceRequired || choice == ToolChoiceNamed {
			return nil, fieldErr("tool_choice", "%s needs tools", choice)
		}
		return nil, nil
	}
	s := &ToolSpec{Choice: choice, Parallel: parallel}
	names := map[string]bool{}
	for i, t := range defs {
		field := fmt.Sprintf("tools[%d].function", i)
		if !ValidToolName(t.Name) {
			return nil, fieldErr(field+".name", "%q: want 1 to 64 letters, digits, '_', '-', '.' or ':'", t.Name)
		}
		if names[t.Name] {
			return nil, fieldErr(field+".name", "%q is given twice", t.Name)
		}
		names[t.Name] = true
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 || string(params) == "null" {
			params = nil
		} else {
			var obj map[string]json.RawMessage
			if json.Unmarshal(params, &obj) != nil {
				return nil, fieldErr(field+".parameters", "want a JSON Schema object")
			}
			if _, err := constrain.CompileJSONSchema(string(params)); err != nil {
				return nil, fieldErr(field+".parameters", "%v", err)
			}
		}
		def := t.Definition
		if def == nil {
			def = FunctionDefinition(t.Name, t.Description, params)
		}
		s.Defs = append(s.Defs, def)
		s.Tools = append(s.Tools, toolcall.Tool{Name: t.Name, Parameters: params})
	}
	if choice == ToolChoiceNamed {
		if !names[named] {
			return nil, fieldErr("tool_choice", "function %q is not one of the tools", named)
		}
		s.Named = named
	}
	return s, nil
}

// CheckToolMessages checks the tool calls and results of msgs[from:] (the
// messages before from were checked before): only assistant messages have
// calls; each call has an id, a valid function name and arguments that
// are JSON (compacted in place, as the template then writes them); a
// "tool" message's ToolCallID names a call of an earlier message.
func CheckToolMessages(msgs []chat.Message, from int) error {
	ids := map[string]bool{}
	for i, m := range msgs {
		field := func(name string) string { return fmt.Sprintf("messages[%d].%s", i, name) }
		if i >= from && len(m.ToolCalls) > 0 && m.Role != "assistant" {
			return fieldErr(field("tool_calls"), "only an assistant message has tool calls")
		}
		for k := range m.ToolCalls {
			c := &m.ToolCalls[k]
			ids[c.ID] = true
			if i < from {
				continue
			}
			cf := fmt.Sprintf("tool_calls[%d]", k)
			if c.ID == "" {
				return fieldErr(field(cf+".id"), "required")
			}
			if !ValidToolName(c.Name) {
				return fieldErr(field(cf+".function.name"), "%q is not a function name", c.Name)
			}
			if c.Arguments == "" {
				continue
			}
			var compact bytes.Buffer
			if json.Compact(&compact, []byte(c.Arguments)) != nil {
				return fieldErr(field(cf+".function.arguments"), "not JSON")
			}
			c.Arguments = compact.String()
		}
		if i >= from && m.Role == "tool" && !ids[m.ToolCallID] {
			return fieldErr(field("tool_call_id"), "%q matches no tool call of an earlier assistant message", m.ToolCallID)
		}
	}
	return nil
}

// ChatPromptTools is ChatPromptVars for a conversation that may hold tool
// calls and results, with the request's tools s (nil: none). A native
// template (Tools.Native) gets the tools as its variable; any other gets
// the conversation rewritten by GenericToolMessages (the tools in a system
// message, calls and results as text). Truncation works on msgs as given,
// and the messages returned are msgs (less what was dropped), never the
// rewritten ones: a door keeps them as the conversation. v.Tools must be
// nil (the tools are s's).
func (d *Door) ChatPromptTools(ctx context.Context, msgs []chat.Message, keep int, trunc Truncation, v chat.Vars, s *ToolSpec) ([]chat.Message, []int32, error) {
	return d.chatPrompt(ctx, msgs, keep, trunc, v, d.toolRewrite(s))
}

// toolRewrite renders the tools of s (nil: none) and a conversation's
// calls and results for the Door's template (see ChatPromptTools).
func (d *Door) toolRewrite(s *ToolSpec) rewrite {
	var defs []json.RawMessage
	if s.Parse() {
		defs = s.Defs
	}
	native := d.tools.Native
	return func(msgs []chat.Message, v chat.Vars) ([]chat.Message, chat.Vars) {
		if native {
			v.Tools = defs
			return msgs, v
		}
		return GenericToolMessages(msgs, defs), v
	}
}

// ToolConstraint is the grammar of tool choice required or named (nil for
// any other choice, and for formats without a call syntax), compiled
// through the Door's cache.
func (d *Door) ToolConstraint(s *ToolSpec) (sample.Constraint, error) {
	if !s.Forced() {
		return nil, nil
	}
	tools, parallel := s.Tools, s.Parallel
	if s.Choice == ToolChoiceNamed {
		parallel = false
		for _, t := range s.Tools {
			if t.Name == s.Named {
				tools = []toolcall.Tool{t}
			}
		}
	}
	syn, err := toolcall.CallSyntax(d.tools.Format, tools)
	if errors.Is(err, toolcall.ErrNoSyntax) {
		return nil, nil // decoding runs free (see the comment at the top)
	}
	if err != nil {
		return nil, fieldErr("tools", "%v", err)
	}
	// Each tool's arguments rule is its schema (any object when it has
	// none), compiled into the grammar by constrain.
	schemas := map[string]string{}
	gbnf := syn.GBNF(parallel, func(i int, t toolcall.ToolSyntax) string {
		name := fmt.Sprintf("args-%d", i)
		if len(t.Schema) == 0 {
			return ""
		}
		schemas[name] = string(t.Schema)
		return "# " + name + ": the tool's JSON Schema\n"
	})
	f := constrain.Format{Grammar: gbnf}
	if len(schemas) > 0 {
		f.GrammarSchemas = schemas
	}
	c, err := d.Constraint(f)
	if errors.Is(err, ErrNoTokenBytes) || errors.Is(err, constrain.ErrInvalid) {
		return nil, fieldErr("tool_choice", "%v", err)
	}
	return c, err
}

// Reply is one reply read by a toolcall.Parser in the Door's format:
// content, reasoning and tool calls, as a door's goroutine assembles them
// (not safe for concurrent use).
type Reply struct {
	p         *toolcall.Parser
	content   strings.Builder
	reasoning strings.Builder
	calls     []replyCall
	err       error // the parser's *toolcall.CallError, once Finish returned it
	// ReasoningTokens counts the tokens whose text left the parser inside
	// reasoning (OpenAI's completion_tokens_details.reasoning_tokens).
	ReasoningTokens int
}

type replyCall struct {
	id, name string
	args     strings.Builder
	done     bool // its CallEnd came: the arguments are complete and parse
}

// ReplyOptions are what a door asks of a reply's reader beside its tools.
type ReplyOptions struct {
	// Reasoning reads the reply for reasoning even when s parses no calls:
	// the door has a place of its own for reasoning (Anthropic's thinking
	// blocks) and the request asked for it or the prompt opened it. The
	// parser then still reads a call the model writes.
	Reasoning bool
	// NewID makes call ids; nil: toolcall's ("call_..."), OpenAI's shape.
	NewID func() string
}

// NewReply is the reader of a reply to prompt under s, or nil when
// nothing is read: s parses nothing (ToolSpec.Parse) and o.Reasoning is
// unset. A prompt that opens the reasoning block (QwQ, the R1 distills:
// OpensReasoning) starts the reply in it; not under required or a named
// tool, whose grammar makes the reply a call from its first token.
func (d *Door) NewReply(s *ToolSpec, prompt []int32, o ReplyOptions) *Reply {
	if !s.Parse() && !o.Reasoning {
		return nil
	}
	opts := toolcall.Options{NewID: o.NewID}
	if s.Parse() {
		opts.Tools = s.Tools
	}
	if !s.Forced() {
		opts.InReasoning = d.OpensReasoning(prompt)
	}
	return &Reply{p: toolcall.NewParser(d.tools.Format, opts)}
}

// reasoningTail is how many of a prompt's last tokens OpensReasoning
// reads: enough for any format's opening marker and the whitespace after.
const reasoningTail = 16

// OpensReasoning reports whether a rendered chat prompt leaves the reply
// inside a reasoning block (toolcall.OpensReasoning in the Door's format:
// QwQ, the R1 distills, Qwen3 with thinking forced on), so that a reply's
// parser starts in reasoning.
func (d *Door) OpensReasoning(prompt []int32) bool {
	tail := prompt[max(0, len(prompt)-reasoningTail):]
	return toolcall.OpensReasoning(d.tools.Format, d.cfg.Tokenizer.Decode(tail))
}

// Push feeds the text of an event (written by tokens tokens) and returns
// the parser's events.
func (r *Reply) Push(text string, tokens int) []toolcall.Event {
	evs := r.p.Push(text)
	if r.p.Reasoning() {
		r.ReasoningTokens += tokens
	}
	r.apply(evs)
	return evs
}

// Finish ends the reply and returns the last events.
func (r *Reply) Finish() []toolcall.Event {
	evs, err := r.p.Finish()
	r.err = err
	r.apply(evs)
	return evs
}

func (r *Reply) apply(evs []toolcall.Event) {
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

// ToolCallError is a reply whose tool call broke the model's format: a
// server error naming the call and the reason. Without a grammar
// enforcing the syntax (tool choice auto) a model can write a malformed
// call, and arguments that do not parse are not handed to the client.
type ToolCallError struct{ Err error }

func (e *ToolCallError) Error() string {
	return "the model wrote a malformed tool call: " + e.Err.Error()
}
func (e *ToolCallError) Unwrap() error { return e.Err }

// Outcome says how the finished reply (Finish called) ended, given the
// scheduler's Final f: calls when it stopped (EOS or a stop sequence)
// after complete calls, which a door reports as its "tool calls" finish
// reason. A call cut by max_tokens is left out (f's FinishLength stands);
// a call the model broke otherwise is a *ToolCallError.
func (r *Reply) Outcome(f *scheduler.Final) (calls bool, err error) {
	if r.err != nil {
		var ce *toolcall.CallError
		if errors.As(r.err, &ce) && ce.Truncated && f.Reason == scheduler.FinishLength {
			return false, nil
		}
		return false, &ToolCallError{Err: r.err}
	}
	stopped := f.Reason == scheduler.FinishEOS || f.Reason == scheduler.FinishStopSequence
	return stopped && len(r.calls) > 0, nil
}

// Content is the reply's content so far.
func (r *Reply) Content() string { return r.content.String() }

// Reasoning is the reply's reasoning so far.
func (r *Reply) Reasoning() string { return r.reasoning.String() }

// Calls are the reply's complete calls (their CallEnd came), in order.
func (r *Reply) Calls() []chat.ToolCall {
	var out []chat.ToolCall
	for _, c := range r.calls {
		if c.done {
			out = append(out, chat.ToolCall{ID: c.id, Name: c.name, Arguments: c.args.String()})
		}
	}
	return out
}

// Message is the reply as the conversation keeps it: an assistant message
// with the content, the reasoning and the complete calls.
func (r *Reply) Message() chat.Message {
	return chat.Message{Role: "assistant", Content: r.Content(), ReasoningContent: r.Reasoning(), ToolCalls: r.Calls()}
}

// ReplyOf is a Reply read by p (a door's tests give a parser that makes
// known call ids); NewReply is the usual way to make one.
func ReplyOf(p *toolcall.Parser) *Reply { return &Reply{p: p} }
