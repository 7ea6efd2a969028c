// Package anthropic serves weft's scheduler over Anthropic's Messages API:
// POST /v1/messages (streaming with Server-Sent Events, or not) and POST
// /v1/messages/count_tokens.
//
// It is a thin wire adapter on the process's one request pipeline,
// internal/frontdoor's Door (Config.Door, shared with the gRPC server and
// the OpenAI door): it decodes Anthropic's JSON, has the Door render the
// conversation through the chat template and tokenize it, fill the
// defaults and follow the stream (metrics labelled door="anthropic"),
// encodes the answer and maps errors. cmd/weft mounts its Routes on the
// OpenAI door's mux (openai.Handler.Mount), so both doors share one
// listener, its TLS, request ids, HTTP metrics and drain; the token is
// the same, taken as x-api-key or as Authorization: Bearer.
//
// # Wire rules
//
// max_tokens is required (400 invalid_request_error without it), as
// Anthropic requires it; temperature defaults to 1, top_p and top_k to
// off. Every range is the scheduler's and the sampler's, as on the other
// doors (Anthropic documents temperature <= 1; weft takes what its
// sampler takes). system is a string or text blocks. A user message's
// content is a string or text and tool_result blocks (a tool_result's
// content a string or text blocks; is_error puts "Error: " before it, as
// templates have no such flag); an assistant message's is a string or
// text, thinking and tool_use blocks. They reach the chat template as
// Hugging Face's messages: text as content, thinking as
// reasoning_content, tool_use as tool_calls, each tool_result as a tool
// message, which must answer a tool_use of an earlier assistant message.
// Image, document and redacted_thinking blocks are refused with a 400.
//
// Tools (tools.go): custom tools (name, description, input_schema, which
// must be a JSON Schema runtime/constrain compiles) and tool_choice auto,
// any, tool and none, with disable_parallel_tool_use, go to the Door as
// for every door (frontdoor.ToolSpec): the template renders them (or the
// generic fallback), any and tool are enforced by the grammar from the
// first token with each input constrained to its schema, and the reply
// is read in the template's tool-call format into thinking, text and
// tool_use blocks (ids "toolu_..."), stop_reason tool_use after complete
// calls. thinking enabled (budget_tokens >= 1, below max_tokens; not
// enforced: max_tokens bounds the reply) or adaptive reads reasoning into
// thinking blocks; enabled and disabled set the template's
// enable_thinking, no thinking field clears it (Anthropic's default),
// adaptive leaves the template's default. A reply without tools or
// thinking is one text block, as the model wrote it. A call the model
// broke (possible only without the grammar: tool_choice auto) fails the
// request with 500 api_error rather than hand the client input that does
// not parse.
//
// A model id the server does not serve is 404 not_found_error.
//
// A stream is message_start, content_block_start (one text block), ping,
// content_block_delta (text_delta) per piece of text, content_block_stop,
// message_delta (stop_reason, stop_sequence, usage) and message_stop, each
// as an "event:" line and a "data:" line. A parsed reply (tools or
// thinking) opens each block when it begins: thinking blocks with
// thinking_delta, text blocks with text_delta, tool_use blocks (id, name,
// input {}) with input_json_delta fragments whose concatenation is the
// input, each closed by content_block_stop before the next opens. An
// error after the stream began is an "error" event in Anthropic's error
// shape.
//
// Errors: {"type":"error","error":{"type","message"}} with Anthropic's
// statuses, chosen in one function, apiErrorOf: 400 invalid_request_error,
// 401 authentication_error, 404 not_found_error, 413 request_too_large,
// 429 rate_limit_error (a full queue, or not admitted within the queue
// timeout), 500 api_error, 529 overloaded_error (loading or draining).
//
// When the client goes away, or accepts nothing for the Door's
// SendStallTimeout, the handler returns and the sequence is cancelled:
// it leaves the batch at the scheduler's next step.
//
// Example:
//
//	a, err := anthropic.New(anthropic.Config{Scheduler: sched, Door: door, ModelNames: names, AuthToken: tok})
//	for _, p := range anthropic.Routes {
//		api.Mount(p, a) // the OpenAI door's handler
//	}
//	a.SetServing(true)
package anthropic
