// Package openai serves weft's scheduler over the OpenAI-compatible HTTP
// API, beside the gRPC server: POST /v1/completions, POST
// /v1/chat/completions (both streaming with Server-Sent Events, or not),
// GET /v1/models and GET /health.
//
// It uses the scheduler and runtime packages only, never the gRPC server
// package. Each request is validated, bounded in bytes before it is
// tokenized (under a concurrency limit) and becomes a job: n choices for
// each of its prompts (chat has one prompt). Every choice is one
// scheduler sequence whose stream is read by one goroutine (read), which
// hands its events to the handler goroutine, the only one that writes the
// response. The first choice of each prompt is submitted at once and the
// other n-1 once it has produced its first event: its full prompt blocks
// are then in the prefix cache, so n choices cost one prefill.
//
// When the client goes away (r.Context() ends), or accepts no byte of the
// response for Config.SendStallTimeout (every write carries that
// deadline), the handler returns, its job's context ends and every
// sequence is cancelled: it leaves the batch at the scheduler's next
// step. A reader goroutine ends after its stream's Final, which the
// scheduler sends at most one step after a cancel.
//
// Every error is turned into OpenAI's JSON error shape and an HTTP status
// by one function, apiErrorOf. Every request gets an X-Request-Id (the
// client's, when valid), one log line carrying it, and is counted in
// weft_http_requests_total{path,code} and
// weft_http_request_duration_seconds{path}.
//
// Structured output: OpenAI's response_format ({"type": "json_object"} or
// {"type": "json_schema", "json_schema": {"schema": ...}}) and vLLM's
// guided_json, guided_regex, guided_choice and guided_grammar (GBNF), at
// most one per request, compiled by runtime/constrain (format.go) and
// cached by their text; a format that does not compile is a 400 naming
// the problem.
//
// Example:
//
//	h, err := openai.New(openai.Config{Scheduler: sched, Tokenizer: m.Tok, Chat: m.Template,
//		ModelNames: []string{m.Name}})
//	h.SetServing(true)
//	http.ListenAndServe("127.0.0.1:8080", h)
package openai
