// Package openai serves weft's scheduler over the OpenAI-compatible HTTP
// API, beside the gRPC server: POST /v1/completions, POST
// /v1/chat/completions (both streaming with Server-Sent Events, or not),
// GET /v1/models and GET /health.
//
// It uses the scheduler and runtime packages only, never the gRPC server
// package. Each request is validated, bounded in bytes before it is
// tokenized (under a concurrency limit), submitted to the scheduler and
// read by the handler goroutine itself, which writes the response; when
// the client goes away (r.Context() ends), the request is cancelled and
// leaves the batch at the scheduler's next step. Every error is turned
// into OpenAI's JSON error shape and an HTTP status by one function,
// apiErrorOf.
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
//		ModelName: m.Name, ContextLen: ctxLen, VocabSize: m.HP.VocabSize})
//	h.SetServing(true)
//	http.ListenAndServe("127.0.0.1:8080", h)
package openai
