// Package frontdoor is what weft's two front doors, the gRPC server
// (package server) and the OpenAI-compatible HTTP API (package openai),
// share on the way from a client's request to the scheduler: the byte
// bound on prompt text, tokenizing under a concurrency bound, building a
// chat prompt (template segments, plain-text contents, truncation), filling
// a scheduler.Request's defaults, and waiting for a cancelled stream's
// Final.
//
// # Who owns what
//
// The scheduler owns every bound on a request's fields (Scheduler.Limits,
// enforced by Submit with a *scheduler.LimitError) and sample.Params.Validate
// owns the sampling parameters' ranges. This package checks neither: it
// consults Limits only to fill defaults (max_tokens) and to decide which
// messages a conversation can drop to fit. Each door keeps its wire-shape
// checks (enum values, oneofs, UTF-8) and maps every error, the scheduler's
// and this package's (*BytesError, *TemplateError), to its own protocol
// in one function (server.Status, openai's writeError).
//
// Field names in errors are the scheduler's and this package's neutral
// names ("prompt", "max_tokens", "messages", "messages.content"); a door
// renames them to its wire fields.
//
// Example:
//
//	d, err := frontdoor.New(frontdoor.Config{Tokenizer: tok, Chat: tmpl, Limits: sched.Limits()})
//	if err := d.CheckPromptBytes("prompt.text", len(text)); err != nil { ... }
//	ids, err := d.Encode(ctx, text, true, false)
//	r := d.Request(id, ids, frontdoor.Options{MaxTokens: 0 /* default */})
//	st, err := sched.Submit(ctx, r) // the limits are checked here
package frontdoor
