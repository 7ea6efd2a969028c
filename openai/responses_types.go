package openai

import (
	"encoding/json"
)

// OpenAI's Responses API (POST /v1/responses), stateless: the wire shapes.
// See responses.go for what is served and how.

// responsesRequest is the body of POST /v1/responses. Pointers tell
// "absent" from zero. Fields of the stateful API (store, previous_response_id,
// conversation, background, prompt) are decoded only to be refused.
type responsesRequest struct {
	Model             string            `json:"model"`
	Input             json.RawMessage   `json:"input"`
	Instructions      *string           `json:"instructions"`
	Tools             []json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens   *int              `json:"max_output_tokens"`
	Temperature       *float64          `json:"temperature"`
	TopP              *float64          `json:"top_p"`
	Text              *struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
	Reasoning *struct {
		Effort *string `json:"effort"`
	} `json:"reasoning"`
	Stream bool `json:"stream"`
	// Metadata is echoed in the response, never used to decide anything.
	Metadata map[string]string `json:"metadata"`
	// User is the caller's end-user id: logged, never used to decide
	// anything.
	User string `json:"user"`

	Store              *bool           `json:"store"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Conversation       json.RawMessage `json:"conversation"`
	Background         *bool           `json:"background"`
	Prompt             json.RawMessage `json:"prompt"`
	Truncation         *string         `json:"truncation"`
	// Include asks for optional output; "message.output_text.logprobs"
	// is served (with TopLogprobs), other values are accepted and give
	// nothing.
	Include     []string `json:"include"`
	TopLogprobs *int     `json:"top_logprobs"`
}

// respInputItem is one item of input: a message (type "message" or
// absent, with a role), a function_call, a function_call_output or a
// reasoning item.
type respInputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// function_call and function_call_output.
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	// reasoning.
	Summary []respTextPart `json:"summary"`
}

// respTextPart is a content part of an input item: input_text,
// output_text (an assistant message replayed), summary_text or
// reasoning_text.
type respTextPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

// respTool is one entry of tools: {"type": "function", "name", ...}.
type respTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// respToolChoice is an object tool_choice: {"type": "function", "name": N}.
type respToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// respTextFormat is text.format: {"type": "text"}, {"type":
// "json_object"} or {"type": "json_schema", "name", "schema", "strict"}.
type respTextFormat struct {
	Type   string          `json:"type"`
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict *bool           `json:"strict"`
}

// The response object.

type respResponse struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"` // "response"
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"` // in_progress, completed, incomplete, failed
	Error              *respError         `json:"error"`
	IncompleteDetails  *respIncomplete    `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []respItem         `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          respReasoningParam `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        float64            `json:"temperature"`
	Text               respTextParam      `json:"text"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []json.RawMessage  `json:"tools"`
	TopP               float64            `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *respUsage         `json:"usage"`
	User               *string            `json:"user"`
	Metadata           map[string]string  `json:"metadata"`
}

type respError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type respIncomplete struct {
	Reason string `json:"reason"` // "max_output_tokens"
}

type respReasoningParam struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type respTextParam struct {
	Format json.RawMessage `json:"format"`
}

type respUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// respItem is an output item: a message (Role, Content), a function_call
// (CallID, Name, Arguments) or a reasoning item (Summary, Content).
type respItem struct {
	ID     string `json:"id"`
	Type   string `json:"type"` // message, function_call, reasoning
	Status string `json:"status"`
	// message.
	Role string `json:"role,omitempty"`
	// message (output_text parts) and reasoning (reasoning_text parts).
	Content *[]respPart `json:"content,omitempty"`
	// function_call.
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
	// reasoning: always present there, empty (weft writes the model's
	// reasoning as content, not a summary).
	Summary *[]respPart `json:"summary,omitempty"`
}

// respPart is a content part of an output item: output_text (with
// annotations) or reasoning_text.
type respPart struct {
	Type        string    `json:"type"`
	Text        string    `json:"text"`
	Annotations *[]string `json:"annotations,omitempty"` // output_text: always []
	// Logprobs (output_text: always present) are the tokens' logprobs
	// when include asks for them, else empty.
	Logprobs *[]chatTokenLogprob `json:"logprobs,omitempty"`
}

// Stream events: each an "event:" line naming Type and a "data:" line.

type respEvent struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	// response.created, .in_progress, .completed, .incomplete.
	Response *respResponse `json:"response,omitempty"`
	// Item events.
	OutputIndex  *int                `json:"output_index,omitempty"`
	Item         *respItem           `json:"item,omitempty"`
	ItemID       string              `json:"item_id,omitempty"`
	ContentIndex *int                `json:"content_index,omitempty"`
	Part         *respPart           `json:"part,omitempty"`
	Delta        *string             `json:"delta,omitempty"`
	Text         *string             `json:"text,omitempty"`
	Arguments    *string             `json:"arguments,omitempty"`
	Name         string              `json:"name,omitempty"`
	Logprobs     *[]chatTokenLogprob `json:"logprobs,omitempty"` // output_text events: always present
	// error.
	Code    *string `json:"code,omitempty"`
	Message string  `json:"message,omitempty"`
	Param   *string `json:"param,omitempty"`
}
