// Package frontdoor is the request pipeline every front door of weft
// uses: the gRPC server (package server), the OpenAI-compatible HTTP API
// (package openai), Anthropic's Messages API (package anthropic) and any
// later door. A door decodes its wire format,
// calls this package, encodes the answer and maps errors; nothing else.
//
// One Door serves a whole process (cmd/weft builds it and hands it to
// every door). It owns:
//   - the byte bound on prompt text (CheckPromptBytes) and tokenizing
//     under one concurrency bound for all doors (Encode, EncodeSegments);
//   - chat prompts: template segments, plain-text contents, BOS,
//     truncation (ChatPrompt), template variables such as tools
//     (ChatPromptVars);
//   - tool calls: the format the model's replies are parsed in (Tools:
//     detected from the template's source by toolcall.Detect, or
//     Config.ToolFormat, the operator's --tool-format), and for templates
//     that render no tools the generic fallback (GenericToolPrompt,
//     GenericToolMessages: a system prompt listing the tools and asking
//     for {"tool_calls": [...]}, calls and results written as text); a
//     request's tools (ToolSpec: names, schemas, tool choice), the tool
//     calls and results of a conversation (CheckToolMessages), their
//     rendering (ChatPromptTools), the grammar of tool choice required or
//     named (ToolConstraint), whether a prompt opens the reasoning block
//     (OpensReasoning) and the parsed reply (NewReply, Reply: content,
//     reasoning, calls, the outcome), which each door decodes into and
//     encodes from its wire;
//   - tokenize endpoints: Tokenize, Detokenize and ChatTokens, the same
//     for gRPC Tokenize/Detokenize and HTTP /tokenize, /detokenize;
//   - a request's defaults: max_tokens, the queue timeout, the seed, and
//     the seeds of n choices of one prompt (Request, Requests);
//   - structured output: one compiled-format cache and one vocabulary
//     trie for the process (Constraint);
//   - request ids: one validator, one way to make one up, one log
//     handler that puts request_id on every line (WithRequestID, Logger);
//   - following a submitted stream to its Final with the door's own send
//     (Follow), the send-stall limit (SendStallTimeout) and the queue
//     timeout's outcome (ErrQueueTimeout, the same on every door);
//   - embeddings (Embed): the number of inputs (MaxEmbedInputs), the
//     dimensions, each input's bytes and tokens, and running the inputs
//     as embedding sequences, at most a batch of them submitted at a
//     time, the rest cancelled at the first failure;
//   - the per-request metrics (TTFT, TPOT, e2e, queue time, success),
//     fed from each Final by Follow and labelled
//     door="grpc"|"openai"|"anthropic"|"responses".
//
// # Who owns what
//
// The scheduler owns every bound on a request's fields (Scheduler.Limits,
// enforced by Submit with a *scheduler.LimitError or *scheduler.TextError)
// and sample.Params.Validate owns the sampling parameters' ranges. Neither
// this package nor a door checks them again: Options carries the values
// as decoded, and Limits is consulted only to fill defaults (max_tokens)
// and to decide which messages a conversation can drop to fit. Each door
// keeps its wire-shape checks (enum values, oneofs, the UTF-8 of what it
// decodes) and maps every error, the scheduler's and this package's
// (*BytesError, *TemplateError, *FieldError, ErrNoTokenBytes, ErrQueueTimeout), to its
// own protocol in one function (server.Status, openai's apiErrorOf).
//
// Field names in errors are the scheduler's and this package's neutral
// names ("prompt", "max_tokens", "messages", "messages.content"); a door
// renames them to its wire fields.
//
// Follow never runs in the scheduler's step loop: it is one goroutine per
// stream on the reading side of the stream's mailbox.
//
// Example:
//
//	d, err := frontdoor.New(frontdoor.Config{Tokenizer: tok, Chat: tmpl, Limits: sched.Limits(), Registry: reg})
//	// per request, in a door:
//	if err := d.CheckPromptBytes("prompt.text", len(text)); err != nil { ... }
//	ids, err := d.Encode(ctx, text, true, false)
//	r := d.Request(id, ids, frontdoor.Options{ /* MaxTokens nil: the default */ })
//	st, err := sched.Submit(ctx, r) // the limits are checked here
//	done := make(chan frontdoor.Followed, 1)
//	stalled := d.Follow(ctx, st, frontdoor.Follow{Door: frontdoor.DoorGRPC, Start: start,
//		Send: send, Done: func(f frontdoor.Followed) { done <- f }})
package frontdoor
