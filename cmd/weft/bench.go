package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/bench"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
)

func init() {
	register(command{name: "bench", short: "load-test a running weft server (latency, throughput, goodput)",
		run: func(ctx context.Context, args []string) error { return runBench(ctx, args, os.Stdout, os.Stderr) }})
}

const benchUsage = `usage: weft bench --addr HOST:PORT [flags]
       weft bench --protocol openai --url http://HOST:PORT [flags]
       weft bench --compare A.json,B.json [--format json]

Sends generation requests to a weft server (or to several, balanced on the
client with --targets and --lb) and reports TTFT, TPOT, ITL and
end-to-end latency (mean, p50, p90, p99), request and token throughput and,
with --slo-ttft/--slo-tpot, goodput. Closed loop with --concurrency, open loop
(gamma arrivals) with --rate. Any failed request makes the command exit 1
after printing. --compare prints the ratios of two saved --format json results
(A over B; > 1 means A is better). With --targets the output splits the
requests and output tokens by server (by_target in json).

flags:
`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	for _, a := range args {
		if a == "--engine" || a == "-engine" || a == "--engine=true" {
			return runEngineBench(ctx, args, stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, benchUsage)
		fs.PrintDefaults()
	}
	var cf clientFlags
	cf.register(fs)
	targets := fs.String("targets", "", "servers to balance over: HOST:PORT,HOST:PORT,... or one dns:///NAME:PORT (replaces --addr)")
	lb := fs.String("lb", "", "client-side balancing with --targets: round_robin (default), weighted_round_robin (on the servers' ORCA load reports) or pick_first")
	concurrency := fs.Int("concurrency", 0, "closed loop: clients sending back to back (default 8 without --rate); with --rate: cap on requests in flight (0: none)")
	rate := fs.Float64("rate", 0, "open loop: requests per second (gamma arrivals; 0 = closed loop)")
	burstiness := fs.Float64("burstiness", 1, "open loop: gamma shape of the arrival gaps; 1 = Poisson, < 1 burstier")
	requests := fs.Int("requests", 100, "measured requests (ignored with --duration)")
	duration := fs.Duration("duration", 0, "send requests for this long instead of a count (e.g. 60s)")
	warmup := fs.Int("warmup", 2, "warm-up requests sent first and not counted")
	seed := fs.Uint64("seed", 0, "seed for prompts, lengths and arrivals")
	workload := fs.String("workload", "", "preset lengths: chat (lognormal prompts and replies) or seed (16-token prompts, outputs 6,50,300)")
	promptLen := fs.String("prompt-len", "32", "prompt length: N, MIN-MAX, lognormal:MEDIAN,SIGMA[,MIN,MAX]")
	outputLen := fs.String("output-len", "64", "output length (same forms, or cycle:A,B,C)")
	outputLens := fs.String("output-lens", "", "comma-separated output lengths the requests cycle through (e.g. 6,50,300); overrides --output-len")
	ignoreEOS := fs.Bool("ignore-eos", true, "generate exactly the requested output length (a request returning another count fails)")
	responseFormat := fs.String("response-format", "", "structured output: a `FILE` holding a ResponseFormat in protojson (e.g. {\"json_schema\": {\"schema\": \"...\"}}), sent on every request; outputs then end when the format accepts, so ignore_eos is off and --output-len is only the max_tokens cap (gRPC only)")
	chatTurn := fs.String("chat-turn", "", "send each request as the one turn of its own Chat stream: a `FILE` holding a ChatTurn in protojson (tools, tool_choice, sampling...; {} for a plain turn) to which the prompt is added as the user message; prompts are then text. With a tool_choice that forces calls, outputs end when the calls are complete, so ignore_eos is off and --output-len is only the max_tokens cap (gRPC only)")
	sloTTFT := fs.Duration("slo-ttft", 0, "goodput: time-to-first-token target (e.g. 200ms)")
	sloTPOT := fs.Duration("slo-tpot", 0, "goodput: time-per-output-token target (e.g. 20ms)")
	format := fs.String("format", "table", "output: table or json")
	plotFile := fs.String("plot", "", "write latency CDFs and tokens/s over time to this PNG")
	noProgress := fs.Bool("no-progress", false, "no progress bar on stderr (it is shown only when stderr is a terminal)")
	waitReady := fs.Duration("wait-ready", 0, "retry GetModelInfo this long until the server answers before starting")
	sweep := fs.String("sweep-rates", "", "R1,R2,...: run the workload open-loop once per rate and print one line each (a request-rate sweep)")
	compare := fs.String("compare", "", "A.json,B.json: print the ratios of two saved json results instead of running")
	protocol := fs.String("protocol", "grpc", "grpc (weft's InferenceService at --addr) or openai (streamed /v1/completions of any OpenAI-compatible server at --url; tokens counted from usage)")
	url := fs.String("url", "http://127.0.0.1:8080", "--protocol openai: the server's base `URL` (the API is under URL/v1)")
	model := fs.String("model", "", "--protocol openai: model id to send (default: the first of /v1/models)")
	promptCopy := fs.Bool("prompt-copy", false, "prompt-copy workload (for speculative decoding): each drawn prompt Q is first sent alone, untimed, for the server's greedy continuation G of --output-len tokens; the measured request then sends Q G Q, whose continuation repeats G if the model repeats its prompt (not with --duration, --response-format or --chat-turn)")
	textPrompts := fs.Bool("text-prompts", false, "send prompts as text words, as --protocol openai does, instead of token ids (compares the two doors on the same work)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *format != "table" && *format != "json" {
		return fmt.Errorf("--format must be table or json, got %q", *format)
	}
	if *compare != "" {
		return benchCompare(*compare, *format, stdout)
	}

	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *protocol != "grpc" && *protocol != "openai" {
		return fmt.Errorf("--protocol must be grpc or openai, got %q", *protocol)
	}
	var err error
	cfg := bench.Config{
		Concurrency: *concurrency, Rate: *rate, Burstiness: *burstiness,
		Warmup: *warmup, Seed: *seed, IgnoreEOS: *ignoreEOS, TextPrompts: *textPrompts, PromptCopy: *promptCopy,
		SLO: bench.SLO{TTFT: *sloTTFT, TPOT: *sloTPOT},
	}
	if *rate == 0 && *concurrency == 0 {
		cfg.Concurrency = 8
	}
	if *responseFormat != "" {
		if set["ignore-eos"] && *ignoreEOS {
			return errors.New("--response-format ends outputs when the format accepts: it cannot be combined with --ignore-eos")
		}
		if *protocol != "grpc" {
			return errors.New("--response-format is sent over gRPC only")
		}
		if cfg.ResponseFormat, err = readResponseFormat(*responseFormat); err != nil {
			return err
		}
		cfg.IgnoreEOS = false
	}
	if *chatTurn != "" {
		if *protocol != "grpc" || *responseFormat != "" {
			return errors.New("--chat-turn is sent over gRPC only, and carries its own response format")
		}
		if cfg.ChatTurn, err = readChatTurn(*chatTurn); err != nil {
			return err
		}
		if m := cfg.ChatTurn.GetToolChoice().GetMode(); m == inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED || cfg.ChatTurn.GetToolChoice().GetFunction() != "" {
			if set["ignore-eos"] && *ignoreEOS {
				return errors.New("--chat-turn with a forced tool choice ends outputs when the calls are complete: it cannot be combined with --ignore-eos")
			}
			cfg.IgnoreEOS = false
		}
	}
	if *duration > 0 {
		if set["requests"] {
			return errors.New("give --requests or --duration, not both")
		}
		cfg.Duration = *duration
	} else {
		cfg.Requests = *requests
	}
	pl, ol := *promptLen, *outputLen
	if *workload != "" {
		p, ok := bench.Presets[*workload]
		if !ok {
			return fmt.Errorf("--workload %q: want chat or seed", *workload)
		}
		if !set["prompt-len"] {
			pl = p.Prompt
		}
		if !set["output-len"] {
			ol = p.Output
		}
	}
	if *outputLens != "" {
		ol = "cycle:" + *outputLens
	}
	if cfg.PromptLen, err = bench.ParseLengthDist(pl); err != nil {
		return fmt.Errorf("--prompt-len: %w", err)
	}
	if cfg.OutputLen, err = bench.ParseLengthDist(ol); err != nil {
		return fmt.Errorf("--output-len: %w", err)
	}
	cfg.Describe = fmt.Sprintf("prompt %s, output %s", cfg.PromptLen, cfg.OutputLen)
	if *workload != "" {
		cfg.Describe = *workload + ": " + cfg.Describe
	}
	if *promptCopy {
		cfg.Describe = "prompt copy Q G Q, " + cfg.Describe
	}
	if !*noProgress && isTerminal(os.Stderr) && stderr == io.Writer(os.Stderr) {
		cfg.Progress = stderr
	}

	if *protocol == "openai" {
		if *targets != "" || *sweep != "" || *waitReady > 0 {
			return errors.New("--protocol openai: --targets, --sweep-rates and --wait-ready are gRPC-only")
		}
		oc := bench.OpenAIConfig{URL: *url, Model: *model}
		if oc.Token, err = cf.token(); err != nil {
			return err
		}
		tcfg, err := cf.tlsConfig()
		if err != nil {
			return err
		}
		if tcfg != nil {
			oc.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: tcfg}}
		}
		res, err := bench.RunOpenAI(ctx, oc, cfg)
		if err != nil {
			return err
		}
		return writeBenchResult(&res, *plotFile, *format, stdout)
	}
	dest := []string{cf.Addr}
	if *targets != "" {
		dest = strings.Split(*targets, ",")
		cf.Addr = *targets
		if *lb == "" {
			*lb = bench.RoundRobin
		}
	} else if *lb == "" {
		*lb = bench.PickFirst
	}
	opts, err := cf.dialOptions()
	if err != nil {
		return err
	}
	conn, err := bench.DialTargets(dest, *lb, opts...)
	if err != nil {
		return err
	}
	defer conn.Close()
	client := inferencev1.NewInferenceServiceClient(conn)
	if *waitReady > 0 {
		if err := waitForServer(ctx, client, *waitReady); err != nil {
			return fmt.Errorf("server %s not ready: %w", cf.Addr, err)
		}
	}
	if *sweep != "" {
		return benchSweep(ctx, client, cfg, *sweep, *format, stdout)
	}
	res, err := bench.Run(ctx, client, cfg)
	if err != nil {
		return err
	}
	return writeBenchResult(&res, *plotFile, *format, stdout)
}

// writeBenchResult writes the plot (if asked), the table or json, and
// returns the result's error (failed requests).
func writeBenchResult(res *bench.Result, plotFile, format string, stdout io.Writer) error {
	if plotFile != "" {
		if err := bench.WritePlot(plotFile, res); err != nil {
			return err
		}
	}
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else if err := res.WriteTable(stdout); err != nil {
		return err
	}
	return res.Err()
}

// benchSweep runs cfg once per rate in rates (comma-separated) and prints a
// table, or with json one object {"sweep": [{"rate": R, "result": {...}}]}.
// Any failed request fails the sweep after printing.
func benchSweep(ctx context.Context, c bench.Client, cfg bench.Config, rates, format string, stdout io.Writer) error {
	var pts []bench.SweepPoint
	var failed []string
	for _, f := range strings.Split(rates, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(r > 0) {
			return fmt.Errorf("--sweep-rates: %q is not a positive rate", f)
		}
		pts = append(pts, bench.SweepPoint{Rate: r})
	}
	for i := range pts {
		run := cfg
		run.Rate = pts[i].Rate
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "rate %g req/s\n", run.Rate)
		}
		res, err := bench.Run(ctx, c, run)
		if err != nil {
			return fmt.Errorf("rate %g: %w", run.Rate, err)
		}
		if err := res.Err(); err != nil {
			failed = append(failed, fmt.Sprintf("rate %g: %v", run.Rate, err))
		}
		pts[i].Result = res
	}
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Sweep []bench.SweepPoint `json:"sweep"`
		}{pts}); err != nil {
			return err
		}
	} else if err := bench.WriteSweepTable(stdout, pts); err != nil {
		return err
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// waitForServer retries GetModelInfo until it answers or `limit` passes.
func waitForServer(ctx context.Context, c inferencev1.InferenceServiceClient, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		_, err := c.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{}, grpc.WaitForReady(true))
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-t.C:
		}
	}
}

func benchCompare(files, format string, stdout io.Writer) error {
	a, b, ok := strings.Cut(files, ",")
	if !ok {
		return fmt.Errorf("--compare wants A.json,B.json, got %q", files)
	}
	ra, err := readResult(a)
	if err != nil {
		return err
	}
	rb, err := readResult(b)
	if err != nil {
		return err
	}
	name := func(p string) string { return strings.TrimSuffix(filepath.Base(p), ".json") }
	c := bench.Compare(name(a), ra, name(b), rb)
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(c); err != nil {
			return err
		}
	} else if err := c.WriteTable(stdout, ra, rb); err != nil {
		return err
	}
	if ra.Failed > 0 || rb.Failed > 0 {
		return fmt.Errorf("compared runs had failed requests (%s: %d, %s: %d)", a, ra.Failed, b, rb.Failed)
	}
	return nil
}

func readResult(path string) (bench.Result, error) {
	var r bench.Result
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// readResponseFormat reads a ResponseFormat in protojson from path.
func readResponseFormat(path string) (*inferencev1.ResponseFormat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--response-format: %w", err)
	}
	f := &inferencev1.ResponseFormat{}
	if err := protojson.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("--response-format %s: %w", path, err)
	}
	if f.GetFormat() == nil {
		return nil, fmt.Errorf("--response-format %s: no format set (want json_schema, json_object, regex, grammar or choice)", path)
	}
	return f, nil
}

// readChatTurn reads a ChatTurn in protojson from path.
func readChatTurn(path string) (*inferencev1.ChatTurn, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--chat-turn: %w", err)
	}
	t := &inferencev1.ChatTurn{}
	if err := protojson.Unmarshal(b, t); err != nil {
		return nil, fmt.Errorf("--chat-turn %s: %w", path, err)
	}
	if len(t.GetMessages()) > 0 {
		return nil, fmt.Errorf("--chat-turn %s: messages are the prompts'; leave them out", path)
	}
	return t, nil
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
