package frontdoor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/toolcall"
)

// varsRenderer is implemented by a ChatRenderer that passes template
// variables (tools, enable_thinking...) to the template; *chat.Template
// does.
type varsRenderer interface {
	RenderSegmentsVars(msgs []chat.Message, addGenerationPrompt bool, v chat.Vars) ([]chat.Segment, error)
}

// sourceRenderer is implemented by a ChatRenderer that can show its
// template's source (*chat.Template does): the tool-call format is
// detected from it.
type sourceRenderer interface {
	Source() string
}

// Tools is how this process's chat template handles tool calls.
type Tools struct {
	// Format is the tool-call format the model's replies are parsed in
	// (and the grammar enforces): Config.ToolFormat when set, else
	// toolcall.Detect of the template's source, else FormatGeneric.
	Format toolcall.Format
	// Native says the template renders tools itself (its source reads a
	// "tools" variable and the renderer takes template variables). When
	// false, a door describes the tools in a system message
	// (GenericToolPrompt) and writes calls and results into the
	// conversation as text (GenericToolMessages).
	Native bool
}

// toolsOf works out cfg's Tools once, at New.
func toolsOf(cfg *Config) (Tools, error) {
	var t Tools
	src := ""
	if sr, ok := cfg.Chat.(sourceRenderer); ok {
		src = sr.Source()
	}
	_, vars := cfg.Chat.(varsRenderer)
	t.Native = vars && strings.Contains(src, "tools")
	switch {
	case cfg.ToolFormat != "":
		f, err := toolcall.ParseFormat(cfg.ToolFormat)
		if err != nil {
			return t, fmt.Errorf("frontdoor: config: ToolFormat: %w", err)
		}
		t.Format = f
	case t.Native:
		t.Format = toolcall.Detect(src)
	default:
		t.Format = toolcall.FormatGeneric
	}
	return t, nil
}

// Tools returns how the chat template handles tool calls.
func (d *Door) Tools() Tools { return d.tools }

// GenericToolPrompt is the system prompt that teaches tools to a model
// whose template knows none (Tools.Native false): it lists the tools (each
// an OpenAI tool definition, as JSON) and asks for toolcall's generic
// shape, the whole reply {"tool_calls": [{"name": ..., "arguments":
// {...}}]}, when calling. It is put in front of the conversation's own
// system message, or as a new first message.
func GenericToolPrompt(tools []json.RawMessage) string {
	var b strings.Builder
	b.WriteString("You can call these tools (JSON definitions, one per line):\n")
	for _, t := range tools {
		b.Write(compactJSON(t))
		b.WriteByte('\n')
	}
	b.WriteString("To call tools, reply with only this JSON and nothing else:\n")
	b.WriteString(`{"tool_calls": [{"name": "<tool name>", "arguments": {<the arguments, as the tool's parameters describe>}}]}`)
	b.WriteString("\nOtherwise, answer normally.")
	return b.String()
}

// compactJSON is raw on one line (raw itself when it does not parse).
func compactJSON(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// GenericToolMessages rewrites a conversation for a template without tool
// support: the tool prompt (GenericToolPrompt) leads the first system
// message (or becomes one); an assistant message's tool calls are appended
// to its content in the generic shape; a "tool" message becomes a "user"
// message whose content says which call it answers.
func GenericToolMessages(msgs []chat.Message, tools []json.RawMessage) []chat.Message {
	out := make([]chat.Message, 0, len(msgs)+1)
	prompt := ""
	if len(tools) > 0 {
		prompt = GenericToolPrompt(tools)
		if len(msgs) == 0 || msgs[0].Role != "system" {
			out = append(out, chat.Message{Role: "system", Content: prompt})
			prompt = ""
		}
	}
	for i, m := range msgs {
		if i == 0 && prompt != "" {
			m.Content = prompt + "\n\n" + m.Content
		}
		switch {
		case m.Role == "assistant" && len(m.ToolCalls) > 0:
			type call struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			}
			calls := make([]call, len(m.ToolCalls))
			for k, c := range m.ToolCalls {
				args := json.RawMessage(c.Arguments)
				if !json.Valid(args) {
					args, _ = json.Marshal(c.Arguments)
				}
				calls[k] = call{Name: c.Name, Arguments: args}
			}
			b, _ := json.Marshal(struct {
				ToolCalls []call `json:"tool_calls"`
			}{calls}) // cannot fail: valid raw JSON and strings
			if m.Content != "" {
				m.Content += "\n"
			}
			m.Content += string(b)
			m.ToolCalls = nil
		case m.Role == "tool":
			head := "Result of tool call " + m.ToolCallID
			if m.Name != "" {
				head += " (" + m.Name + ")"
			}
			m = chat.Message{Role: "user", Content: head + ":\n" + m.Content}
		}
		out = append(out, m)
	}
	return out
}
