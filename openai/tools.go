package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/constrain"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/runtime/toolcall"
)

// Tool calling (OpenAI's tools, tool_choice, parallel_tool_calls).
//
// The tools go to the chat template (chat.Vars.Tools) when it renders
// tools itself (frontdoor.Tools.Native); otherwise a system message
// describes them and asks for toolcall's generic JSON shape
// (frontdoor.GenericToolMessages). The reply is read by a toolcall.Parser
// in the Door's format (detected from the template, or the operator's
// --tool-format) into content, reasoning_content and tool_calls.
//
// tool_choice:
//   - "auto" (the default with tools): free decoding, parsed.
//   - "none": the tools are not rendered and the reply is not parsed for
//     calls: it is all content. (OpenAI shows the tools to the model and
//     never calls; not rendering them is the simplest way to never call.)
//   - "required", or {"type": "function", "function": {"name": N}}:
//     decoding is constrained from the first token to the format's call
//     syntax (toolcall.CallSyntax's GBNF, compiled by runtime/constrain
//     through the Door's cache): one or more calls of any tool
//     (parallel_tool_calls, default true), or exactly one call of tool N.
//     Each call's arguments are constrained to its tool's JSON Schema
//     (constrain.CompileGBNFSchemas defines the grammar's argument rules by
//     the schemas), so they parse and validate. Formats whose
//     arguments are text (qwen3-coder, deepseek-dsml) have no such syntax:
//     there decoding runs free, parsed as with "auto".
//
// Each tool's parameters must be a JSON Schema runtime/constrain compiles;
// a tool message's tool_call_id must name a call of an earlier assistant
// message. Both are 400s naming the field.

// toolDef is one entry of tools.
type toolDef struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

// toolChoice is tool_choice: a string, or a named function.
type toolChoice struct {
	Type     string `json:"type"`
	Function *struct {
		Name string `json:"name"`
	} `json:"function"`
}

// wireToolCall is a tool call on the wire: in an assistant message of the
// request, in a response message, and (with Index) in a stream delta.
type wireToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// toolSpec is a request's tools, decoded and checked.
type toolSpec struct {
	raw      []json.RawMessage // the tool definitions, for the template
	tools    []toolcall.Tool
	choice   string // "auto", "none", "required" or "function"
	named    string // the function tool_choice names
	parallel bool
	door     frontdoor.Tools
	// inReasoning: the rendered prompt opened the reasoning block
	// (toolcall.OpensReasoning), so the reply starts in it.
	inReasoning bool
}

// parse reports whether the reply is parsed for calls.
func (s *toolSpec) parse() bool { return s != nil && len(s.tools) > 0 && s.choice != "none" }

// toolsOf decodes and checks tools, tool_choice and parallel_tool_calls;
// nil when the request has no tools.
func (h *Handler) toolsOf(req *chatRequest) (*toolSpec, error) {
	hasChoice := len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null"
	if len(req.Tools) == 0 {
		if hasChoice {
			var s string
			if json.Unmarshal(req.ToolChoice, &s) != nil || (s != "none" && s != "auto") {
				return nil, badParam("tool_choice", "needs tools")
			}
		}
		return nil, nil
	}
	s := &toolSpec{choice: "auto", parallel: true, door: h.door.Tools()}
	if req.ParallelToolCalls != nil {
		s.parallel = *req.ParallelToolCalls
	}
	names := map[string]bool{}
	for i, raw := range req.Tools {
		field := fmt.Sprintf("tools[%d]", i)
		var d toolDef
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, badParam(field, "want a tool object: %v", err)
		}
		if d.Type != "function" {
			return nil, badParam(field+".type", "%q is not supported (only \"function\")", d.Type)
		}
		if d.Function == nil {
			return nil, badParam(field+".function", "required")
		}
		if !toolName(d.Function.Name) {
			return nil, badParam(field+".function.name", "%q: want 1 to 64 letters, digits, '_', '-', '.' or ':'", d.Function.Name)
		}
		if names[d.Function.Name] {
			return nil, badParam(field+".function.name", "%q is given twice", d.Function.Name)
		}
		names[d.Function.Name] = true
		params := d.Function.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = nil
		} else {
			var obj map[string]json.RawMessage
			if json.Unmarshal(params, &obj) != nil {
				return nil, badParam(field+".function.parameters", "want a JSON Schema object")
			}
			if _, err := constrain.CompileJSONSchema(string(params)); err != nil {
				return nil, badParam(field+".function.parameters", "%v", err)
			}
		}
		s.raw = append(s.raw, raw)
		s.tools = append(s.tools, toolcall.Tool{Name: d.Function.Name, Parameters: params})
	}
	if hasChoice {
		var str string
		if json.Unmarshal(req.ToolChoice, &str) == nil {
			switch str {
			case "none", "auto", "required":
				s.choice = str
			default:
				return nil, badParam("tool_choice", "%q: want none, auto, required or a function", str)
			}
		} else {
			var c toolChoice
			if err := json.Unmarshal(req.ToolChoice, &c); err != nil || c.Type != "function" || c.Function == nil {
				return nil, badParam("tool_choice", `want none, auto, required or {"type": "function", "function": {"name": ...}}`)
			}
			if !names[c.Function.Name] {
				return nil, badParam("tool_choice", "function %q is not one of the tools", c.Function.Name)
			}
			s.choice, s.named = "function", c.Function.Name
		}
	}
	return s, nil
}

// toolName reports whether s is a function name OpenAI accepts (and the
// parsers read as one).
func toolName(s string) bool {
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

// render returns the conversation and the tools as the template gets
// them: the tools as its variable (a native template), or in a system
// message (generic fallback, no variable).
func (s *toolSpec) render(msgs []chat.Message, native bool) ([]chat.Message, []json.RawMessage) {
	var tools []json.RawMessage
	if s.parse() {
		tools = s.raw
	}
	if native {
		return msgs, tools
	}
	return frontdoor.GenericToolMessages(msgs, tools), nil
}

// templateVars are the template variables a request sets beside the
// tools: reasoning_effort, and chat_template_kwargs (vLLM's; its
// enable_thinking and reasoning_effort are the Vars of those names, the
// rest Extra).
func templateVars(req *chatRequest) (chat.Vars, error) {
	v := chat.Vars{ReasoningEffort: req.ReasoningEffort}
	for k, raw := range req.ChatTemplateKwargs {
		switch k {
		case "enable_thinking":
			var b bool
			if json.Unmarshal(raw, &b) != nil {
				return v, badParam("chat_template_kwargs.enable_thinking", "want true or false")
			}
			v.EnableThinking = &b
		case "reasoning_effort":
			if json.Unmarshal(raw, &v.ReasoningEffort) != nil {
				return v, badParam("chat_template_kwargs.reasoning_effort", "want a string")
			}
		case "tools":
			return v, badParam("chat_template_kwargs.tools", "give the tools as the request's tools")
		default:
			if v.Extra == nil {
				v.Extra = map[string]json.RawMessage{}
			}
			v.Extra[k] = raw
		}
	}
	return v, nil
}

// constraint is the grammar of tool_choice required or a named function
// (nil otherwise, and for formats without a call syntax), compiled through
// the Door's cache.
func (h *Handler) toolConstraint(s *toolSpec) (sample.Constraint, error) {
	if s == nil || (s.choice != "required" && s.choice != "function") {
		return nil, nil
	}
	tools, parallel := s.tools, s.parallel
	if s.choice == "function" {
		parallel = false
		for _, t := range s.tools {
			if t.Name == s.named {
				tools = []toolcall.Tool{t}
			}
		}
	}
	syn, err := toolcall.CallSyntax(s.door.Format, tools)
	if errors.Is(err, toolcall.ErrNoSyntax) {
		return nil, nil // decoding runs free (see the package comment above)
	}
	if err != nil {
		return nil, badParam("tools", "%v", err)
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
	c, err := h.door.Constraint(f)
	if errors.Is(err, frontdoor.ErrNoTokenBytes) || errors.Is(err, constrain.ErrInvalid) {
		return nil, badParam("tool_choice", "%v", err)
	}
	return c, err
}

// messageCalls decodes an assistant message's tool_calls.
func messageCalls(i int, in []wireToolCall) ([]chat.ToolCall, error) {
	out := make([]chat.ToolCall, len(in))
	for k, c := range in {
		field := fmt.Sprintf("messages[%d].tool_calls[%d]", i, k)
		if c.Type != "" && c.Type != "function" {
			return nil, badParam(field+".type", "%q is not supported (only \"function\")", c.Type)
		}
		if c.ID == "" {
			return nil, badParam(field+".id", "required")
		}
		if !toolName(c.Function.Name) {
			return nil, badParam(field+".function.name", "%q is not a function name", c.Function.Name)
		}
		args := c.Function.Arguments
		if args != "" && !json.Valid([]byte(args)) {
			return nil, badParam(field+".function.arguments", "not JSON")
		}
		var compact bytes.Buffer
		if args != "" && json.Compact(&compact, []byte(args)) == nil {
			args = compact.String()
		}
		out[k] = chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args}
	}
	return out, nil
}
