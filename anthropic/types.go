package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/chat"
)

// messagesRequest is the body of POST /v1/messages (and, without the
// generation fields, of /v1/messages/count_tokens).
type messagesRequest struct {
	Model         string          `json:"model"`
	System        json.RawMessage `json:"system"`
	Messages      []message       `json:"messages"`
	MaxTokens     *int            `json:"max_tokens"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	StopSequences []string        `json:"stop_sequences"`
	Metadata      *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	Stream     bool              `json:"stream"`
	Tools      []json.RawMessage `json:"tools"`
	ToolChoice *toolChoice       `json:"tool_choice"`
	Thinking   *thinkingParam    `json:"thinking"`
}

// message is one turn: content is a string or an array of blocks.
type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// block is one content block of a request: text (user, assistant,
// system, tool_result content), thinking (assistant), tool_use
// (assistant), tool_result (user).
type block struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
	// thinking
	Thinking *string `json:"thinking"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// tool_result
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// present reports whether a raw field was sent with a value.
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// toolErrorPrefix leads the content of a tool_result with is_error set:
// chat templates have no such flag, so the model reads it in the text.
const toolErrorPrefix = "Error: "

// blocksOf decodes a content value: a string (one text block, ok false)
// or an array of blocks.
func blocksOf(param string, raw json.RawMessage) (s string, blocks []block, isBlocks bool, err error) {
	if !present(raw) {
		return "", nil, false, badParam(param, "is required")
	}
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, false, badParam(param, "%v", err)
		}
		if !utf8.ValidString(s) {
			return "", nil, false, badParam(param, "not valid UTF-8")
		}
		return s, nil, false, nil
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", nil, false, badParam(param, "want a string or an array of content blocks")
	}
	return "", blocks, true, nil
}

// textOfBlock is a text block's text.
func textOfBlock(field string, b block) (string, error) {
	if b.Text == nil {
		return "", badParam(field+".text", "is required")
	}
	if !utf8.ValidString(*b.Text) {
		return "", badParam(field+".text", "not valid UTF-8")
	}
	return *b.Text, nil
}

// textOf decodes a system value or a tool_result's content: a string, or
// text blocks concatenated.
func textOf(param string, raw json.RawMessage) (string, error) {
	s, blocks, isBlocks, err := blocksOf(param, raw)
	if err != nil || !isBlocks {
		return s, err
	}
	var buf strings.Builder
	for i, b := range blocks {
		field := fmt.Sprintf("%s[%d]", param, i)
		if b.Type != "text" {
			return "", badParam(field+".type", "%q: only text blocks are served here", b.Type)
		}
		t, err := textOfBlock(field, b)
		if err != nil {
			return "", err
		}
		buf.WriteString(t)
	}
	return buf.String(), nil
}

// conversation checks req's wire shape and turns system and messages into
// the chat messages the template renders (no rendering here: the Door's).
// An assistant message's text, thinking and tool_use blocks become its
// content, reasoning and tool calls; a user message's tool_result blocks
// become tool messages (in block order with its text), each answering a
// tool_use of an earlier assistant message.
func conversation(req *messagesRequest) ([]chat.Message, error) {
	if len(req.Messages) == 0 {
		return nil, badParam("messages", "at least one message is required")
	}
	var msgs []chat.Message
	if present(req.System) {
		s, err := textOf("system", req.System)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, chat.Message{Role: "system", Content: s})
	}
	calls := map[string]string{} // tool_use id -> tool name, of the assistant messages so far
	for i, m := range req.Messages {
		param := fmt.Sprintf("messages[%d].content", i)
		switch m.Role {
		case "user", "assistant":
		default:
			return nil, badParam(fmt.Sprintf("messages[%d].role", i), "%q: want user or assistant", m.Role)
		}
		s, blocks, isBlocks, err := blocksOf(param, m.Content)
		if err != nil {
			return nil, err
		}
		if !isBlocks || len(blocks) == 0 {
			msgs = append(msgs, chat.Message{Role: m.Role, Content: s})
			continue
		}
		var out []chat.Message
		if m.Role == "assistant" {
			a, err := assistantMessage(param, blocks, calls)
			if err != nil {
				return nil, err
			}
			out = []chat.Message{a}
		} else if out, err = userMessages(param, blocks, calls); err != nil {
			return nil, err
		}
		msgs = append(msgs, out...)
	}
	return msgs, nil
}

// assistantMessage is an assistant turn's blocks as one message; its
// tool_use ids join calls.
func assistantMessage(param string, blocks []block, calls map[string]string) (chat.Message, error) {
	out := chat.Message{Role: "assistant"}
	for k, b := range blocks {
		field := fmt.Sprintf("%s[%d]", param, k)
		switch b.Type {
		case "text":
			t, err := textOfBlock(field, b)
			if err != nil {
				return out, err
			}
			out.Content += t
		case "thinking":
			if b.Thinking == nil {
				return out, badParam(field+".thinking", "is required")
			}
			out.ReasoningContent += *b.Thinking
		case "redacted_thinking":
			return out, badParam(field+".type", "redacted_thinking blocks are not served (this server never sends them)")
		case "tool_use":
			c, err := toolUseCall(field, b)
			if err != nil {
				return out, err
			}
			if _, dup := calls[c.ID]; dup {
				return out, badParam(field+".id", "%q is the id of an earlier tool_use", c.ID)
			}
			calls[c.ID] = c.Name
			out.ToolCalls = append(out.ToolCalls, c)
		case "tool_result":
			return out, badParam(field+".type", "tool_result blocks belong in user messages")
		default:
			return out, badParam(field+".type", "%q: an assistant message takes text, thinking and tool_use blocks", b.Type)
		}
	}
	return out, nil
}

// toolUseCall is a tool_use block as a tool call (its input compacted).
func toolUseCall(field string, b block) (chat.ToolCall, error) {
	if b.ID == "" {
		return chat.ToolCall{}, badParam(field+".id", "is required")
	}
	if !frontdoor.ValidToolName(b.Name) {
		return chat.ToolCall{}, badParam(field+".name", "%q is not a tool name", b.Name)
	}
	var obj map[string]json.RawMessage
	if !present(b.Input) || json.Unmarshal(b.Input, &obj) != nil {
		return chat.ToolCall{}, badParam(field+".input", "want a JSON object")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b.Input); err != nil {
		return chat.ToolCall{}, badParam(field+".input", "%v", err)
	}
	return chat.ToolCall{ID: b.ID, Name: b.Name, Arguments: compact.String()}, nil
}

// userMessages are a user turn's blocks: runs of text blocks as user
// messages, each tool_result as a tool message.
func userMessages(param string, blocks []block, calls map[string]string) ([]chat.Message, error) {
	var out []chat.Message
	var text strings.Builder
	hasText := false
	flush := func() {
		if hasText {
			out = append(out, chat.Message{Role: "user", Content: text.String()})
			text.Reset()
			hasText = false
		}
	}
	for k, b := range blocks {
		field := fmt.Sprintf("%s[%d]", param, k)
		switch b.Type {
		case "text":
			t, err := textOfBlock(field, b)
			if err != nil {
				return nil, err
			}
			text.WriteString(t)
			hasText = true
		case "tool_result":
			name, ok := calls[b.ToolUseID]
			if !ok {
				return nil, badParam(field+".tool_use_id", "%q matches no tool_use of an earlier assistant message", b.ToolUseID)
			}
			content := ""
			if present(b.Content) {
				var err error
				if content, err = textOf(field+".content", b.Content); err != nil {
					return nil, err
				}
			}
			if b.IsError {
				content = toolErrorPrefix + content
			}
			flush()
			out = append(out, chat.Message{Role: "tool", ToolCallID: b.ToolUseID, Name: name, Content: content})
		case "tool_use", "thinking", "redacted_thinking":
			return nil, badParam(field+".type", "%s blocks belong in assistant messages", b.Type)
		default:
			return nil, badParam(field+".type", "%q: a user message takes text and tool_result blocks", b.Type)
		}
	}
	flush()
	return out, nil
}

// decodeRequest parses a body into a request (the fuzzed decoder).
func decodeRequest(body []byte) (*messagesRequest, error) {
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, badParam("body", "%v", err)
	}
	return &req, nil
}

// Response shapes.

// contentBlock is one content block of a response: text (Text),
// thinking (Thinking, Signature) or tool_use (ID, Name, Input).
type contentBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

type usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CacheReadInputTokens are the prompt tokens served from the prefix
	// cache (Anthropic's name for them).
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

type messageResponse struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"` // "message"
	Role         string         `json:"role"` // "assistant"
	Content      []contentBlock `json:"content"`
	Model        string         `json:"model"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        usage          `json:"usage"`
}

type countTokensResponse struct {
	InputTokens int `json:"input_tokens"`
}

// Streaming events (data: lines; the event: line repeats Type).

type messageStartEvent struct {
	Type    string          `json:"type"`
	Message messageResponse `json:"message"`
}

type contentBlockStartEvent struct {
	Type         string       `json:"type"`
	Index        int          `json:"index"`
	ContentBlock contentBlock `json:"content_block"`
}

// delta is a content_block_delta's delta: text_delta (Text),
// thinking_delta (Thinking) or input_json_delta (PartialJSON).
type delta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

type contentBlockDeltaEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta delta  `json:"delta"`
}

type indexEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type messageDeltaEvent struct {
	Type  string `json:"type"`
	Delta struct {
		StopReason   *string `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	} `json:"delta"`
	Usage usage `json:"usage"`
}

type typeEvent struct {
	Type string `json:"type"`
}
