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
	Model             string          `json:"model"`
	MaxTokens         *int            `json:"max_tokens"`
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	TopK              *int            `json:"top_k"`
	MinP              *float64        `json:"min_p"`
	Seed              *int64          `json:"seed"`
	Stop              json.RawMessage `json:"stop"`
	Stream            bool            `json:"stream"`
	StreamOptions     *streamOptions  `json:"stream_options"`
	IgnoreEOS         bool            `json:"ignore_eos"`
	StopTokenIDs      []int32         `json:"stop_token_ids"`
	N                 *int            `json:"n"`
	PresencePenalty   *float64        `json:"presence_penalty"`
	FrequencyPenalty  *float64        `json:"frequency_penalty"`
	RepetitionPenalty *float64        `json:"repetition_penalty"`
	MinTokens         *int            `json:"min_tokens"`
	// User is the caller's end-user id: logged with the request, never
	// used to decide anything.
	User string `json:"user"`
	formatParams
}

type completionRequest struct {
	commonParams
	Prompt json.RawMessage `json:"prompt"`
	// Logprobs is the number of most likely tokens reported per position
	// (0: only the chosen token's logprob), as in OpenAI's legacy API.
	Logprobs *int `json:"logprobs"`
	// Echo prepends the prompt to each choice's text.
	Echo bool `json:"echo"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// ToolCalls are an assistant message's calls (its content may be
	// null then).
	ToolCalls []wireToolCall `json:"tool_calls"`
	// ToolCallID is, in a "tool" message, the call it answers.
	ToolCallID string `json:"tool_call_id"`
	// Name is a "tool" message's function name (optional).
	Name string `json:"name"`
	// ReasoningContent is an assistant message's reasoning, which
	// thinking models' templates replay or drop.
	ReasoningContent string `json:"reasoning_content"`
}

type chatRequest struct {
	commonParams
	Messages            []chatMessage `json:"messages"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	Logprobs            bool          `json:"logprobs"`
	TopLogprobs         *int          `json:"top_logprobs"`
	// Tools, ToolChoice and ParallelToolCalls: tools.go.
	Tools             []json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	// ReasoningEffort and ChatTemplateKwargs are template variables
	// (templateVars).
	ReasoningEffort    string                     `json:"reasoning_effort"`
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
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

// promptIn is one completion prompt: text or token ids (exactly one set).
type promptIn struct {
	text string
	ids  []int32
}

// maxPrompts bounds the prompts of one completions request.
const maxPrompts = 8

// promptsOf decodes a completion prompt: a string, an array of strings,
// an array of token ids or an array of arrays of token ids. Each prompt
// becomes its own choices (index = prompt index * n + choice).
func promptsOf(raw json.RawMessage) ([]promptIn, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badParam("prompt", "required")
	}
	var out []promptIn
	var text string
	var strs []string
	var ids []int32
	var idss [][]int32
	switch {
	case json.Unmarshal(raw, &text) == nil:
		out = []promptIn{{text: text}}
	case json.Unmarshal(raw, &ids) == nil:
		out = []promptIn{{ids: ids}}
	case json.Unmarshal(raw, &strs) == nil:
		for _, s := range strs {
			out = append(out, promptIn{text: s})
		}
	case json.Unmarshal(raw, &idss) == nil:
		for _, p := range idss {
			out = append(out, promptIn{ids: p})
		}
	default:
		return nil, badParam("prompt", "want a string, an array of strings, an array of token ids or an array of arrays of token ids")
	}
	if len(out) == 0 || len(out) > maxPrompts {
		return nil, badParam("prompt", "%d prompts; want 1 to %d", len(out), maxPrompts)
	}
	for i, p := range out {
		if p.text == "" && len(p.ids) == 0 {
			if len(out) == 1 {
				return nil, badParam("prompt", "empty prompt")
			}
			return nil, badParam("prompt", "prompt %d is empty", i)
		}
	}
	return out, nil
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

type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// completionTokensDetails: reasoning tokens (a job with tools) and, with
// speculative decoding, the drafted tokens in OpenAI's Predicted Outputs
// fields: accepted drafts appear in the completion, rejected ones do not.
type completionTokensDetails struct {
	ReasoningTokens          int `json:"reasoning_tokens"`
	AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
	RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
}

type usage struct {
	PromptTokens            int                      `json:"prompt_tokens"`
	CompletionTokens        int                      `json:"completion_tokens"`
	TotalTokens             int                      `json:"total_tokens"`
	PromptTokensDetails     *promptTokensDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *completionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// completionLogprobs is a completion choice's logprobs (OpenAI's legacy
// shape). Echoed prompt tokens have null token_logprobs and top_logprobs:
// the model computes logits for the last prompt position only.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

type completionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
}

// chatOut is a message or a delta. Content is null in a message with
// only tool calls, and in a delta that carries none.
type chatOut struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
}

// chatTopLogprob is one alternative at a position; Bytes are the token's
// exact bytes (its Token text may have lost some to UTF-8 replacement).
type chatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type chatTokenLogprob struct {
	chatTopLogprob
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      *chatOut      `json:"message,omitempty"`
	Delta        *chatOut      `json:"delta,omitempty"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
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
