// Package server is weft's gRPC front end: it implements
// inference.v1.InferenceService on top of a scheduler.Scheduler.
//
// The server is a wire adapter on the process's one request pipeline,
// internal/frontdoor's Door (Config.Door, shared with the OpenAI door):
// it checks each request's wire shape (enum values, oneofs, UTF-8),
// decodes it into the Door's Options, and the Door bounds and tokenizes
// the text, renders chat turns, fills the defaults (max_tokens 0 is
// proto3's unset: the default), compiles response formats, follows the
// stream and records the per-request metrics (door="grpc"). The scheduler
// owns every bound on a request (Scheduler.Limits, refused by Submit with
// a *scheduler.LimitError) and sample.Params.Validate the sampling ranges;
// the server checks neither, and GetModelInfo reports the scheduler's
// context length, the one honoured. has_chat_template is true only when
// Chat renders with the model's own template (Config.ChatFallback empty);
// without any template Chat is refused with NO_CHAT_TEMPLATE.
//
// Chat turns with tools (tools.go) go through the Door's tool pipeline as
// the OpenAI door's requests do (ToolSpec, CheckToolMessages,
// ChatPromptTools, ToolConstraint, Reply): the server decodes the
// ChatTurn's tools and choice, renames the Door's field names to the
// turn's (turn.tools[i].parameters, turn.messages[i].tool_call_id), and
// encodes the parsed reply as chunks (content in text, reasoning_text,
// tool-call deltas) and a Final with the calls and
// FINISH_REASON_TOOL_CALLS. The conversation keeps the parsed assistant
// message, so the next turn (the tool results) renders as the template
// expects and reuses the earlier turns' KV from the prefix cache.
//
// The scheduler's Stream is drained by exactly one goroutine per RPC that
// calls Send (frontdoor.Door.Follow). The scheduler never waits for a
// client: a slow reader only grows its own mailbox, and a reader that
// accepts nothing for the Door's SendStallTimeout is cut off with
// codes.ResourceExhausted (reason SLOW_READER) and its sequence cancelled.
// A request not admitted within the queue timeout ends, like one refused
// by a full queue, with codes.ResourceExhausted (reason QUEUE_FULL, with
// RetryInfo), not with a Final (a Chat turn gets it as its TurnError).
//
// Errors from every layer go through one function, Status, which gives each
// a gRPC code and exactly one google.rpc.ErrorInfo (domain
// "weft.inference.v1"); a limit's ErrorInfo names the proto field and the
// bound (metadata "field", "op", "limit", "value").
//
// The gRPC server comes with go-grpc-middleware v2 interceptors (slog
// logging, panic recovery to codes.Internal, optional bearer-token auth),
// the otelgrpc stats handler, grpc health (NOT_SERVING until SetServing(true)
// and again from Shutdown on), reflection, keepalive enforcement, message
// size limits and optional TLS. Prometheus metrics (vLLM's meanings, weft_
// names; the per-request ones are the Door's) are served by
// MetricsHandler.
//
// ORCA load reports (orca.go) go into every RPC's trailers and out of band
// through OpenRcaService (at most every MinORCAInterval). They and the
// gauges read the scheduler's published Stats when asked, so the step loop
// pays nothing for them.
//
// Example:
//
//	door, err := frontdoor.New(frontdoor.Config{Tokenizer: tok, Chat: tmpl, Limits: sched.Limits(), Registry: reg})
//	srv, err := server.New(server.Config{Scheduler: sched, Door: door, Tokenizer: tok, Info: info, Registry: reg})
//	// GetModelInfo's context_length is sched.Limits().ContextLen.
//	if err != nil { ... }
//	go srv.Serve(lis)
//	srv.SetServing(true)
//	<-ctx.Done()
//	srv.Shutdown(drainCtx) // health NOT_SERVING, drain, GracefulStop, then Stop
package server
