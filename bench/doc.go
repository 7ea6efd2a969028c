// Package bench is weft's serving benchmark: a load generator for weft's
// gRPC InferenceService (Run) or any OpenAI-compatible HTTP server
// (RunOpenAI: weft's own HTTP API, llama-server, vLLM), the statistics it
// reports, the workloads it sends and a plot of the results. Both
// protocols share the load loops, workloads and statistics; only sending
// one request differs. `weft bench` (cmd/weft/bench.go) is its command line;
// scripts/bench-compare.sh runs it against continuous and static batching.
//
// # Load
//
// Closed loop: Config.Concurrency clients each send their next request as
// soon as the previous one ends. Open loop: requests arrive at Config.Rate
// per second whatever the server is doing, the gaps gamma-distributed with
// shape Config.Burstiness (1 = Poisson; see Arrivals), each request on its
// own goroutine, optionally capped at Concurrency in flight. A run sends
// Config.Requests requests or sends for Config.Duration; Config.Warmup
// requests go first and are not counted.
//
// # Several servers
//
// DialTargets balances over a static HOST:PORT list (a manual resolver) or
// one dns:/// name, with pick_first, round_robin or weighted_round_robin
// (ServiceConfig: weights from the servers' out-of-band ORCA reports).
// Each Record keeps the peer that served it; Result.ByTarget sums them.
//
// # Workload
//
// Prompts are token ids sent directly (GenerateRequest.token_ids), BOS first,
// drawn from PromptVocab: ids that are not special, decode to plain text and
// tokenize back to themselves. Lengths come from a LengthDist: Fixed,
// Uniform, LogNormal (chat-like) or Cycle (--output-lens 6,50,300: requests
// cycle through exactly those output lengths). Text prompts (RunOpenAI,
// or Config.TextPrompts over gRPC) are PromptLen words of PromptWords
// instead; their token counts are the server's. ignore_eos makes the output
// length exact, and a request that returns another count fails. Workload.
// Request(i) depends only on the seed and i, so runs are repeatable.
//
// # Structured output
//
// Config.ResponseFormat (`weft bench --response-format FILE`) sends one
// ResponseFormat on every request. A constrained output ends when the
// format's automaton accepts, so its length cannot be forced: ignore_eos
// is off, the drawn output length is only max_tokens, a request counts as
// completed on a finish reason of EOS, stop sequence or length, and its
// tokens are the final usage's. Result.FinishReasons says how many
// outputs the format ended (eos) and how many max_tokens cut (length).
//
// # Measurements
//
// Per request (Record), timed on the client from the moment Generate is
// called: TTFT is the arrival of the first chunk; end-to-end the arrival of
// the final message; TPOT = (end-to-end - TTFT) / (output tokens - 1), for
// requests of two tokens or more; ITL is the gap between consecutive chunk
// messages, counted ONCE per message even when a message carries k tokens
// (vLLM's convention: what a client waits between updates); queue time is
// the server's own figure from Final.timings.queue_wait. Aggregates are the
// mean, p50, p90, p99 and max by linear interpolation between closest ranks
// (see Percentile). Throughputs divide by the measured span, from the first
// request sent to the last final message. Goodput counts the requests that
// meet every SLO given (TTFT <= --slo-ttft, TPOT <= --slo-tpot; a one-token
// request meets any TPOT target) per second of that span.
//
// Over the OpenAI protocol each request is a streamed /v1/completions
// with stream_options.include_usage: token counts come from the usage (a
// server may merge or split tokens across events), TTFT is the first
// event with text, ITL the gaps between such events.
//
// # Failures
//
// Any RPC error, a final message with an error, timeout or cancel reason, a
// stream whose chunks do not add up to the final usage, or (with ignore_eos)
// a wrong output length fails that request: it is counted in Result.Failed,
// contributes no latency, and Result.Err turns the run into an error, so
// `weft bench` prints the figures and exits 1. A failed warm-up request or an
// unreachable server fails Run itself.
//
// Example:
//
//	conn, _ := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
//	res, err := bench.Run(ctx, inferencev1.NewInferenceServiceClient(conn), bench.Config{
//		Concurrency: 8, Requests: 90, Warmup: 2,
//		PromptLen: bench.Fixed{N: 16}, OutputLen: bench.Cycle{Lens: []int{6, 50, 300}},
//		IgnoreEOS: true,
//	})
//	if err == nil {
//		err = res.Err()
//	}
package bench
