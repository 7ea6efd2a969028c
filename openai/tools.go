package openai

import (
	"encoding/json"
	"fmt"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/chat"
)

// Tool calling (OpenAI's tools, tool_choice, parallel_tool_calls) is
// frontdoor's (frontdoor.ToolSpec and the comment above it): this file
// decodes the wire shapes and hands them over. tool_choice "none",
// "auto", "required" and {"type": "function", "function": {"name": N}} are
// frontdoor.ToolChoiceNone, Auto, Required and Named.

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

// toolChoiceMode reads a tool_choice given as a string (none, auto or
// required: the same words on Chat Completions and Responses); isString is
// false for any other JSON value (the door's own function-choice object).
func toolChoiceMode(raw json.RawMessage) (choice frontdoor.ToolChoice, isString bool, err error) {
	var str string
	if json.Unmarshal(raw, &str) != nil {
		return frontdoor.ToolChoiceAuto, false, nil
	}
	switch str {
	case "none":
		return frontdoor.ToolChoiceNone, true, nil
	case "auto":
		return frontdoor.ToolChoiceAuto, true, nil
	case "required":
		return frontdoor.ToolChoiceRequired, true, nil
	}
	return frontdoor.ToolChoiceAuto, true, badParam("tool_choice", "%q: want none, auto, required or a function", str)
}

// toolsOf decodes tools, tool_choice and parallel_tool_calls and has
// the Door check them; nil when the request has no tools.
func (h *Handler) toolsOf(req *chatRequest) (*frontdoor.ToolSpec, error) {
	choice, named := frontdoor.ToolChoiceAuto, ""
	if len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null" {
		if c, isString, err := toolChoiceMode(req.ToolChoice); isString {
			if err != nil {
				return nil, err
			}
			choice = c
		} else {
			var c toolChoice
			if err := json.Unmarshal(req.ToolChoice, &c); err != nil || c.Type != "function" || c.Function == nil {
				return nil, badParam("tool_choice", `want none, auto, required or {"type": "function", "function": {"name": ...}}`)
			}
			choice, named = frontdoor.ToolChoiceNamed, c.Function.Name
		}
	}
	parallel := true
	if req.ParallelToolCalls != nil {
		parallel = *req.ParallelToolCalls
	}
	defs := make([]frontdoor.ToolDef, len(req.Tools))
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
		defs[i] = frontdoor.ToolDef{Name: d.Function.Name, Description: d.Function.Description,
			Parameters: d.Function.Parameters, Definition: raw}
	}
	return h.door.ToolSpec(defs, choice, named, parallel)
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

// messageCalls decodes an assistant message's tool_calls (their type is
// the wire's; the rest frontdoor.CheckToolMessages checks).
func messageCalls(i int, in []wireToolCall) ([]chat.ToolCall, error) {
	out := make([]chat.ToolCall, len(in))
	for k, c := range in {
		if c.Type != "" && c.Type != "function" {
			return nil, badParam(fmt.Sprintf("messages[%d].tool_calls[%d].type", i, k), "%q is not supported (only \"function\")", c.Type)
		}
		out[k] = chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments}
	}
	return out, nil
}
