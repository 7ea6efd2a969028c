// Package openai serves weft's scheduler over the OpenAI-compatible HTTP
// API, beside the gRPC server: POST /v1/completions, POST
// /v1/chat/completions (both streaming with Server-Sent Events, or not),
// POST /v1/embeddings, POST /v1/responses (OpenAI's Responses API,
// stateless: responses.go says what it serves; its requests take chat's
// path), GET /v1/models and GET /health.
//
// It is a wire adapter on the process's one request pipeline,
// internal/frontdoor's Door (Config.Door, shared with the gRPC server; it
// never imports the server package). Each request's JSON is decoded into
// the Door's Options; the Door bounds the text in bytes and tokenizes it
// (under the process's one concurrency limit), renders chat prompts, fills
// the defaults, derives the seeds of n choices, compiles structured-output
// formats, follows each stream and records the per-request metrics
// (door="openai"). A request becomes a job: n choices for each of its
// prompts (chat has one prompt). Every choice is one scheduler sequence
// whose stream is followed by one goroutine (frontdoor.Door.Follow), which
// hands its events to the handler goroutine, the only one that writes the
// response. The first choice of each prompt is submitted at once and the
// other n-1 once it has produced its first event: its full prompt blocks
// are then in the prefix cache, so n choices cost one prefill.
//
// # Wire rules
//
// The ranges of every value are the scheduler's and the sampler's, the
// same as on gRPC: temperature in [0, 100] (OpenAI documents <= 2; weft,
// like vLLM, takes what its sampler takes), top_p in [0, 1] with 0 or 1
// off, max_tokens >= 1 (an explicit 0 is refused), logprobs (completions)
// bounded as top_logprobs. This door's own rules are only what the
// scheduler has no notion of: n in [1, 8], at most 8 prompts per
// completions request, /v1/completions' max_tokens defaulting to 16
// (OpenAI's documented default; chat takes the Door's default, the room
// left in the context up to the scheduler's), top_k -1 meaning off
// (vLLM's), top_logprobs only with logprobs: true, and the body's size
// (Config.MaxBodyBytes).
//
// When the client goes away (r.Context() ends), or accepts no byte of the
// response for the Door's SendStallTimeout (every write carries that
// deadline), the handler returns, its job's context ends and every
// sequence is cancelled: it leaves the batch at the scheduler's next
// step. A reader goroutine ends after its stream's Final, which the
// scheduler sends at most one step after a cancel.
//
// Every error is turned into OpenAI's JSON error shape and an HTTP status
// by one function, apiErrorOf. A request not admitted within the queue
// timeout gets what a full queue gets: 429 with Retry-After. Every request
// gets an X-Request-Id (the client's, when valid: the Door's rule), one
// log line carrying it, and is counted in weft_http_requests_total{path,code}
// and weft_http_request_duration_seconds{path}.
//
// Embeddings (embeddings.go): input as a string, an array of strings, an
// array of token ids or an array of arrays of token ids (each string or id
// array one input, text tokenized with BOS as a prompt is);
// encoding_format float (default) or base64 (the little-endian float32
// bytes, as OpenAI sends them); dimensions, when set, must be the model's
// hidden size (vectors are never truncated: only models trained for it
// keep their meaning truncated). The Door owns the rest: 1 to
// frontdoor.MaxEmbedInputs inputs, each of at most the context's tokens
// (an error names the input: param "input[i]"), every input one embedding
// sequence batched with the rest of the traffic. A model or batching mode
// without embeddings answers 400 with code model_not_supported.
//
// Structured output: OpenAI's response_format ({"type": "json_object"} or
// {"type": "json_schema", "json_schema": {"schema": ...}}) and vLLM's
// guided_json, guided_regex, guided_choice and guided_grammar (GBNF), at
// most one per request, compiled by runtime/constrain (format.go) and
// cached by their text in the Door (one cache for every door); a format
// that does not compile is a 400 naming the problem.
//
// Tool calling (tools.go decodes the wire shapes, reply.go encodes them;
// the pipeline is frontdoor's, shared with gRPC Chat): function tools, tool_choice (none,
// auto, required, a named function) and parallel_tool_calls; assistant
// tool_calls and tool messages in the history go to the chat template
// (or, for a template that renders no tools, frontdoor's generic
// fallback). With tools, each choice's output is read by a
// toolcall.Parser in the Door's format into message.content (null when
// there are only calls), reasoning_content and tool_calls, or their stream
// deltas (a call's index, id, type and name first, then its arguments by
// index), with finish_reason tool_calls and
// usage.completion_tokens_details.reasoning_tokens. required and a named
// function are enforced by the grammar engine: the call syntax with each
// tool's JSON Schema as its arguments, so every call parses and validates.
// auto decodes freely (its calls parse, the arguments are not checked
// against the schema); none neither renders the tools nor parses calls.
// strict is accepted and changes nothing: the schema is enforced whenever
// a call is. Without tools a reply is returned as the model wrote it.
//
// With speculative decoding (the scheduler's SpecConfig), the usage of
// completions and chat completions counts each request's drafted tokens in
// OpenAI's Predicted Outputs fields: completion_tokens_details.
// accepted_prediction_tokens (drafts verification accepted, part of
// completion_tokens) and rejected_prediction_tokens (the rest).
//
// Example:
//
//	h, err := openai.New(openai.Config{Scheduler: sched, Door: door, Tokenizer: m.Tok,
//		ModelNames: []string{m.Name}})
//	h.SetServing(true)
//	http.ListenAndServe("127.0.0.1:8080", h)
package openai
