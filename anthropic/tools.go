package anthropic

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/chat"
)

// Tool use and extended thinking: this file decodes Anthropic's tools,
// tool_choice and thinking into the Door's shared shapes
// (frontdoor.ToolSpec, the template's enable_thinking); the Door checks,
// renders, enforces and parses them as for every door.
//
// tool_choice auto (the default), any, tool {name} and none are the
// Door's ToolChoiceAuto, ToolChoiceRequired, ToolChoiceNamed and
// ToolChoiceNone: any and tool
// are enforced by the grammar from the first token, each call's input
// constrained to its tool's input_schema. disable_parallel_tool_use makes
// any give exactly one call (tool always gives one).
//
// thinking: enabled (budget_tokens >= 1 and below max_tokens) sets the
// template's enable_thinking; disabled, and a request without thinking
// (Anthropic's default: no thinking), clear it; adaptive leaves it to the
// template's default. The budget is checked, not enforced: max_tokens
// bounds the whole reply, reasoning included. As on Anthropic's API,
// thinking (enabled or adaptive) does not combine with tool_choice any or
// tool.

// toolDef is one entry of tools: a custom tool.
type toolDef struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// toolChoice is tool_choice.
type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// thinkingParam is thinking.
type thinkingParam struct {
	Type         string `json:"type"`
	BudgetTokens *int   `json:"budget_tokens"`
	Display      string `json:"display"`
}

// toolSpecOf decodes tools and tool_choice and has the Door check them;
// nil when the request has no tools.
func (h *Handler) toolSpecOf(req *messagesRequest) (*frontdoor.ToolSpec, error) {
	defs := make([]frontdoor.ToolDef, len(req.Tools))
	for i, raw := range req.Tools {
		field := fmt.Sprintf("tools[%d]", i)
		var d toolDef
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, badParam(field, "want a tool object: %v", err)
		}
		if d.Type != "" && d.Type != "custom" {
			return nil, badParam(field+".type", "%q: only custom tools are served", d.Type)
		}
		if !present(d.InputSchema) {
			return nil, badParam(field+".input_schema", "is required")
		}
		defs[i] = frontdoor.ToolDef{Name: d.Name, Description: d.Description, Parameters: d.InputSchema}
	}
	choice, named, parallel := frontdoor.ToolChoiceAuto, "", true
	if c := req.ToolChoice; c != nil {
		parallel = !c.DisableParallelToolUse
		switch c.Type {
		case "auto":
		case "any":
			choice = frontdoor.ToolChoiceRequired
		case "tool":
			choice, named = frontdoor.ToolChoiceNamed, c.Name
		case "none":
			choice = frontdoor.ToolChoiceNone
		default:
			return nil, badParam("tool_choice.type", "%q: want auto, any, tool or none", c.Type)
		}
	}
	return h.door.ToolSpec(defs, choice, named, parallel)
}

// thinking is how a request thinks.
type thinking struct {
	// on: the model may reason (enabled or adaptive): the reply is read
	// for reasoning, which comes back as thinking blocks.
	on bool
	// budget is enabled's budget_tokens (0 otherwise).
	budget int
}

// thinkingOf decodes thinking into the template variable enable_thinking
// (v) and the request's thinking.
func thinkingOf(req *messagesRequest, v *chat.Vars) (thinking, error) {
	enable := func(b bool) { v.EnableThinking = &b }
	p := req.Thinking
	if p == nil {
		enable(false) // Anthropic's default: no thinking unless asked
		return thinking{}, nil
	}
	if p.Display != "" && p.Display != "summarized" {
		return thinking{}, badParam("thinking.display", "%q: only summarized is served", p.Display)
	}
	var th thinking
	switch p.Type {
	case "enabled":
		if p.BudgetTokens == nil || *p.BudgetTokens < 1 {
			return thinking{}, badParam("thinking.budget_tokens", "a positive budget is required")
		}
		enable(true)
		th = thinking{on: true, budget: *p.BudgetTokens}
	case "adaptive":
		th = thinking{on: true}
	case "disabled":
		enable(false)
	default:
		return thinking{}, badParam("thinking.type", "%q: want enabled, adaptive or disabled", p.Type)
	}
	if th.on && req.ToolChoice != nil && (req.ToolChoice.Type == "any" || req.ToolChoice.Type == "tool") {
		return thinking{}, badParam("tool_choice", "thinking may not be enabled when tool_choice forces tool use (any or tool)")
	}
	return th, nil
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// newToolUseID makes a tool_use id: "toolu_" and 24 letters and digits.
func newToolUseID() string {
	b := make([]byte, 24)
	rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return "toolu_" + string(b)
}

// toolFieldNames renames the tool fields of frontdoor's *FieldError
// (OpenAI's names) to this wire's.
var toolFieldNames = strings.NewReplacer(".function.name", ".name", ".function.parameters", ".input_schema")

// toolField is a frontdoor.FieldError's field as this wire names it:
// tools[1].function.parameters is tools[1].input_schema; tool_choice and
// tools stay.
func toolField(f string) string { return toolFieldNames.Replace(f) }
