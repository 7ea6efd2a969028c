package openai

import (
	"encoding/json"
	"fmt"
	"strings"
)

// streamOptions is stream_options.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// commonParams are the parameters completions and chat share. Pointers
// tell "absent" from zero. Unknown fields are ignored, like OpenAI does.
type commonParams struct {
	Model         string          `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	MinP          *float64        `json:"min_p"`
	Seed          *int64          `json:"seed"`
	Stop          json.RawMessage `json:"stop"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	IgnoreEOS     bool            `json:"ignore_eos"`
	StopTokenIDs  []int32         `json:"stop_token_ids"`
	N             *int            `json:"n"`
	formatParams
}

type completionRequest struct {
	commonParams
	Prompt json.RawMessage `json:"prompt"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type chatRequest struct {
	commonParams
	Messages            []chatMessage `json:"messages"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
}

// stopStrings decodes stop: null, a string or an array of strings.
func stopStrings(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badParam("stop", "want a string or an array of strings")
	}
	return many, nil
}

// promptOf decodes a completion prompt: a string, an array of one string,
// or an array of token ids. Exactly one of text and ids is set.
func promptOf(raw json.RawMessage) (text string, ids []int32, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, badParam("prompt", "required")
	}
	if err := json.Unmarshal(raw, &text); err == nil {
		if text == "" {
			return "", nil, badParam("prompt", "empty prompt")
		}
		return text, nil, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		if len(strs) != 1 || strs[0] == "" {
			return "", nil, badParam("prompt", "an array of strings must hold exactly one non-empty prompt (batched prompts are not supported)")
		}
		return strs[0], nil, nil
	}
	if err := json.Unmarshal(raw, &ids); err == nil {
		if len(ids) == 0 {
			return "", nil, badParam("prompt", "empty prompt")
		}
		return "", ids, nil
	}
	return "", nil, badParam("prompt", "want a string, an array of one string or an array of token ids")
}

// contentOf decodes a message's content: a string or an array of text
// parts ({"type":"text","text":...}), concatenated.
func contentOf(i int, raw json.RawMessage) (string, error) {
	param := fmt.Sprintf("messages[%d].content", i)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badParam(param, "want a string or an array of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", badParam(param, "part type %q is not supported (only \"text\")", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// Responses.

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type completionChoice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
}

type chatOut struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content"`
}

type chatChoice struct {
	Index        int       `json:"index"`
	Message      *chatOut  `json:"message,omitempty"`
	Delta        *chatOut  `json:"delta,omitempty"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
}

type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string  `json:"object"`
	Data   []model `json:"data"`
}
