package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/weft-inference/weft/runtime/chat"
)

// messagesRequest is the body of POST /v1/messages (and, without the
// generation fields, of /v1/messages/count_tokens). Fields this door does
// not serve yet (tools, tool_choice, thinking) are decoded only to be
// refused.
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
	Stream     bool            `json:"stream"`
	Tools      json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Thinking   json.RawMessage `json:"thinking"`
}

// message is one turn: content is a string or an array of blocks.
type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// block is one content block of a request; only "text" is served.
type block struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// present reports whether a raw field was sent with a value.
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// errToolsNotServed is the message of every refused tool field or block.
const errToolsNotServed = "tool use on /v1/messages is not served yet (tools, tool_choice, tool_use and tool_result blocks); use /v1/chat/completions for tools"

// textOf decodes a content or system value: a string, or an array of
// text blocks, concatenated. Tool and thinking blocks are refused (not
// served yet), never dropped. param names the field in errors.
func textOf(param string, raw json.RawMessage) (string, error) {
	if !present(raw) {
		return "", badParam(param, "is required")
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", badParam(param, "%v", err)
		}
	} else {
		var blocks []block
		if err := json.Unmarshal(raw, &blocks); err != nil {
			return "", badParam(param, "want a string or an array of content blocks")
		}
		var buf []byte
		for i, b := range blocks {
			switch b.Type {
			case "text":
				if b.Text == nil {
					return "", badParam(fmt.Sprintf("%s[%d].text", param, i), "is required")
				}
				buf = append(buf, *b.Text...)
			case "tool_use", "tool_result", "server_tool_use":
				return "", badParam(fmt.Sprintf("%s[%d].type", param, i), "%s", errToolsNotServed)
			case "thinking", "redacted_thinking":
				return "", badParam(fmt.Sprintf("%s[%d].type", param, i), "thinking blocks on /v1/messages are not served yet")
			default:
				return "", badParam(fmt.Sprintf("%s[%d].type", param, i), "%q: only text blocks are served", b.Type)
			}
		}
		s = string(buf)
	}
	if !utf8.ValidString(s) {
		return "", badParam(param, "not valid UTF-8")
	}
	return s, nil
}

// conversation checks req's wire shape and turns system and messages into
// the chat messages the template renders (no rendering here: the Door's).
func conversation(req *messagesRequest) ([]chat.Message, error) {
	if present(req.Tools) {
		return nil, badParam("tools", "%s", errToolsNotServed)
	}
	if present(req.ToolChoice) {
		return nil, badParam("tool_choice", "%s", errToolsNotServed)
	}
	if present(req.Thinking) {
		return nil, badParam("thinking", "extended thinking on /v1/messages is not served yet")
	}
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
	for i, m := range req.Messages {
		switch m.Role {
		case "user", "assistant":
		default:
			return nil, badParam(fmt.Sprintf("messages[%d].role", i), "%q: want user or assistant", m.Role)
		}
		c, err := textOf(fmt.Sprintf("messages[%d].content", i), m.Content)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, chat.Message{Role: m.Role, Content: c})
	}
	return msgs, nil
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

type textBlock struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
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
	ID           string      `json:"id"`
	Type         string      `json:"type"` // "message"
	Role         string      `json:"role"` // "assistant"
	Content      []textBlock `json:"content"`
	Model        string      `json:"model"`
	StopReason   *string     `json:"stop_reason"`
	StopSequence *string     `json:"stop_sequence"`
	Usage        usage       `json:"usage"`
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
	Type         string    `json:"type"`
	Index        int       `json:"index"`
	ContentBlock textBlock `json:"content_block"`
}

type textDelta struct {
	Type string `json:"type"` // "text_delta"
	Text string `json:"text"`
}

type contentBlockDeltaEvent struct {
	Type  string    `json:"type"`
	Index int       `json:"index"`
	Delta textDelta `json:"delta"`
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
