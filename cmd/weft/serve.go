package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/weft-inference/weft/anthropic"
	"github.com/weft-inference/weft/cuda/gpumem"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/openai"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/toolcall"
	"github.com/weft-inference/weft/scheduler"
	"github.com/weft-inference/weft/server"
)

func init() {
	register(command{name: "serve", short: "serve a model over gRPC", run: runServe})
}

// serveConfig is `weft serve`'s flags.
type serveConfig struct {
	Model          string        // GGUF path; "" serves the built-in model
	Addr           string        // gRPC listen address
	MetricsAddr    string        // Prometheus /metrics address; "" disables
	Pprof          bool          // Go's /debug/pprof/ profiles beside /metrics
	HTTPAddr       string        // OpenAI-compatible HTTP API address; "" disables
	ServedNames    []string      // model ids the HTTP API serves (empty: the model's name)
	Backend        string        // auto, cpu or cuda
	Batching       string        // continuous or static
	MaxSeqs        int           // running sequences per batch
	BatchSize      int           // static batching group size
	MaxBatchTokens int           // tokens per step
	MaxWaiting     int           // waiting queue bound
	KVMemory       int64         // bytes for the KV pool (0: backend default)
	KVType         string        // the CPU KV cache's element type: f16, f32 or q8_0 (checkKVType)
	Weights        string        // where the CPU backend reads the weights: auto, memory or mapped (checkWeights)
	MaxPromptBytes int64         // text bytes a request may have tokenized (0: 16 per context token)
	ChatTemplate   string        // Chat's template instead of the model's: chatml, plain or a file ("": the model's)
	ToolFormat     string        // the tool-call format of replies (toolcall.ParseFormat; "": detected from the template)
	GPUMemUtil     float64       // fraction of GPU memory weft may count on
	CUDAEager      bool          // no CUDA graphs: launch every kernel
	DrainTimeout   time.Duration // graceful shutdown deadline
	AuthToken      string        // bearer token; "" disables auth
	AuthTokenFile  string        // file holding the bearer token (one line)
	TLSCert        string        // PEM certificate; with TLSKey enables TLS
	TLSKey         string        // PEM key
	LogLevel       string        // debug, info, warn, error
	BatchInvariant bool          // batch-invariant CPU kernels (startBatchInvariant); CUDA is refused
	EmbedPooling   string        // how embeddings pool hidden states when the model file does not say (mean, last, cls; "": the scheduler's default)
	// Spec is speculative decoding (--spec and --spec-*); the scheduler
	// checks it, and refuses it on a backend that does not verify drafts.
	Spec scheduler.SpecConfig
	// DraftModel is the GGUF path of --spec draft's draft model; it must
	// share the target's vocabulary. DraftKVBlocks sizes its own KV pool
	// (0: as many blocks as the target's pool).
	DraftModel    string
	DraftKVBlocks int
}

func (c *serveConfig) validate() error {
	switch c.Backend {
	case "auto", "cpu", "cuda":
	default:
		return fmt.Errorf("--backend %q: want auto, cpu or cuda", c.Backend)
	}
	if c.ToolFormat != "" {
		if _, err := toolcall.ParseFormat(c.ToolFormat); err != nil {
			return fmt.Errorf("--tool-format: %w", err)
		}
	}
	if c.BatchInvariant && c.Backend == "cuda" {
		return errBatchInvariantCUDA("--backend cuda")
	}
	if err := checkWeights(c.Weights); err != nil {
		return err
	}
	if err := checkKVType(c.KVType, c.Backend); err != nil {
		return err
	}
	switch c.Batching {
	case scheduler.BatchingContinuous, scheduler.BatchingStatic:
	default:
		return fmt.Errorf("--batching %q: want continuous or static", c.Batching)
	}
	if _, err := batch.ParsePooling(c.EmbedPooling); c.EmbedPooling != "" && err != nil {
		return fmt.Errorf("--embed-pooling: %w", err)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if c.Pprof && c.MetricsAddr == "" {
		return errors.New("--pprof serves on --metrics-addr, which is empty")
	}
	if c.AuthToken != "" && c.AuthTokenFile != "" {
		return errors.New("--auth-token and --auth-token-file exclude each other")
	}
	if c.DrainTimeout <= 0 {
		return fmt.Errorf("--drain-timeout %v must be > 0", c.DrainTimeout)
	}
	if !(c.GPUMemUtil > 0 && c.GPUMemUtil <= 1) {
		return fmt.Errorf("--gpu-memory-utilization %g: want a fraction in (0, 1]", c.GPUMemUtil)
	}
	if (c.Spec.Source == scheduler.SpecDraft) != (c.DraftModel != "") {
		return errors.New("--spec draft and --draft-model go together")
	}
	if c.DraftKVBlocks < 0 {
		return fmt.Errorf("--draft-kv-blocks %d must be >= 0", c.DraftKVBlocks)
	}
	if c.MaxSeqs < 0 || c.BatchSize < 0 || c.MaxBatchTokens < 0 || c.MaxWaiting < 0 || c.KVMemory < 0 || c.MaxPromptBytes < 0 {
		return errors.New("sizes must be >= 0 (0: default)")
	}
	// The backend sizes its step buffers for the batch the scheduler will
	// plan, so both get the same resolved shape.
	c.MaxSeqs, c.MaxBatchTokens = scheduler.BatchShape(c.MaxSeqs, c.MaxBatchTokens)
	return nil
}

// byteSize is a flag.Value for sizes like 512MiB, 2G or 1048576.
type byteSize struct{ n *int64 }

func (b byteSize) String() string {
	if b.n == nil {
		return "0"
	}
	return strconv.FormatInt(*b.n, 10)
}

func (b byteSize) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b.n = n
	return nil
}

func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want bytes, optionally with K/M/G or KiB/MiB/GiB", s)
	}
	return n * mult, nil
}

func parseServeFlags(args []string) (serveConfig, error) {
	c := serveConfig{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.Model, "model", "", "GGUF model `path` (empty: the built-in random-weight model)")
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:50051", "gRPC listen `host:port`")
	fs.StringVar(&c.HTTPAddr, "http-addr", "127.0.0.1:8080", "OpenAI-compatible HTTP API `host:port` (same TLS and auth token as gRPC; empty: off)")
	fs.Func("served-model-name", "model `id` the OpenAI HTTP API serves instead of the model's name (repeatable or comma-separated)", func(v string) error {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n == "" {
				return errors.New("empty model id")
			}
			c.ServedNames = append(c.ServedNames, n)
		}
		return nil
	})
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "127.0.0.1:9090", "Prometheus /metrics `host:port` (empty: off)")
	fs.BoolVar(&c.Pprof, "pprof", false, "also serve Go's runtime profiles (heap, goroutines, CPU) at /debug/pprof/ on --metrics-addr; it is not authenticated, so keep that address private")
	fs.StringVar(&c.Backend, "backend", "auto", "compute backend: auto, cpu or cuda")
	fs.BoolVar(&c.BatchInvariant, "batch-invariant", false, batchInvariantUsage)
	fs.StringVar(&c.Batching, "batching", scheduler.BatchingContinuous, "continuous or static")
	fs.IntVar(&c.MaxSeqs, "max-seqs", 0, fmt.Sprintf("most sequences in one batch (0: scheduler default, %d)", scheduler.DefaultMaxSeqs))
	fs.IntVar(&c.BatchSize, "batch-size", 0, "group size for --batching static (0: max-seqs)")
	fs.IntVar(&c.MaxBatchTokens, "max-batch-tokens", 0,
		fmt.Sprintf("most tokens fed in one step (0: scheduler default, %d or max-seqs if larger)", scheduler.DefaultMaxBatchTokens))
	fs.StringVar(&c.Spec.Source, "spec", scheduler.SpecOff,
		"speculative decoding's draft source: off, ngram (prompt lookup: continue an earlier occurrence of the last tokens) or draft (a draft model's greedy continuation: --draft-model); CPU backend, continuous batching")
	fs.StringVar(&c.DraftModel, "draft-model", "", "GGUF `path` of --spec draft's draft model, run on the CPU: a smaller or more quantised model with the target's vocabulary (e.g. weft gen-model --type Q4_0 of the same preset)")
	fs.IntVar(&c.DraftKVBlocks, "draft-kv-blocks", 0, "blocks of the draft model's own KV pool (0: as many as the target's pool); a sequence that finds none gets no drafts")
	fs.IntVar(&c.Spec.MaxDraft, "spec-max-draft", 0, fmt.Sprintf("most tokens drafted per sequence and step; each sequence adapts below it (0: %d)", scheduler.DefaultSpecMaxDraft))
	fs.IntVar(&c.Spec.NgramMax, "spec-ngram-max", 0, fmt.Sprintf("longest n-gram --spec ngram matches (0: %d)", scheduler.DefaultSpecNgramMax))
	fs.IntVar(&c.Spec.NgramMin, "spec-ngram-min", 0, "shortest n-gram --spec ngram matches (0: 1)")
	fs.IntVar(&c.Spec.MaxStepTokens, "spec-max-step-tokens", 0,
		fmt.Sprintf("speculate only in steps of at most this many tokens, drafts included: above it the step is compute-bound and drafts cost real time; measure the crossover on the machine (weft bench with and without --spec) (0: %d)", scheduler.DefaultSpecMaxStepTokens))
	fs.IntVar(&c.MaxWaiting, "max-waiting", 0, fmt.Sprintf("most requests waiting for admission (0: scheduler default, %d)", scheduler.DefaultMaxWaiting))
	fs.Var(byteSize{&c.KVMemory}, "kv-memory", "bytes for the KV cache pool, e.g. 256MiB (0: backend default)")
	fs.StringVar(&c.KVType, "kv-type", "f16", kvTypeUsage)
	fs.StringVar(&c.Weights, "weights", "auto", weightsUsage)
	fs.Var(byteSize{&c.MaxPromptBytes}, "max-prompt-bytes",
		fmt.Sprintf("longest prompt text (Generate text, chat contents, Tokenize text) tokenized, e.g. 1MiB; longer is PROMPT_TOO_LONG (0: %d bytes per context token)", frontdoor.PromptBytesPerToken))
	fs.StringVar(&c.EmbedPooling, "embed-pooling", scheduler.DefaultPooling.String(),
		"how /v1/embeddings and Embed pool the tokens' hidden states into one vector when the model file has no pooling_type: mean, last or cls (the first token's)")
	fs.StringVar(&c.ChatTemplate, "chat-template", "",
		"`template` Chat renders with instead of the model's: chatml, plain or a Jinja file (empty: the model's own; a model without one serves no Chat)")
	fs.StringVar(&c.ToolFormat, "tool-format", "",
		"`format` of tool calls in the model's replies, overriding the one detected from the chat template: "+toolFormatNames()+" (empty: detected)")
	fs.Float64Var(&c.GPUMemUtil, "gpu-memory-utilization", gpumem.DefaultUtilization,
		"fraction of the GPU's memory weft may count on (weights, workspace and KV) when --kv-memory is 0")
	fs.BoolVar(&c.CUDAEager, "cuda-eager", false,
		"launch every CUDA kernel of a decode step one by one instead of replaying the step from a CUDA graph (for debugging and comparison; slower)")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 30*time.Second, "how long in-flight streams may finish on SIGTERM")
	fs.StringVar(&c.AuthToken, "auth-token", "", "require `token` as a bearer token (health is exempt; visible in ps: prefer --auth-token-file)")
	fs.StringVar(&c.AuthTokenFile, "auth-token-file", "", "read the bearer token from `file` (trailing newline trimmed)")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM certificate `file` (with --tls-key: serve TLS)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM private key `file`")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	if err := parseWithEnv(fs, args, os.LookupEnv); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return c, c.validate()
}

// cudaOptions are the flags the CUDA backend is built with.
type cudaOptions struct {
	Device         int     // CUDA device ordinal
	KVBytes        int64   // --kv-memory (0: size from device memory)
	Utilization    float64 // --gpu-memory-utilization
	MaxSeqs        int     // --max-seqs (0: backend default)
	MaxBatchTokens int     // --max-batch-tokens (0: backend default)
	Eager          bool    // --cuda-eager
}

// newCUDABackend builds the CUDA backend for m. serve_cuda.go sets it in
// every build (without cgo it fails with cuda.ErrNoDriver, and auto falls
// back to the CPU with that reason); tests replace it with fakes.
var newCUDABackend func(m *runtime.Model, o cudaOptions, log *slog.Logger) (batch.Backend, error)

// healthReporter is implemented by backends that can break for good (the
// CUDA backend after a sticky error). Backends without it are always healthy.
type healthReporter interface {
	Healthy() (ok bool, reason string)
}

// memoryWatcher is implemented by backends that watch device memory (the
// CUDA backend through NVML): the gate pauses admission when free memory
// runs low, the collectors export the memory gauges. Either may be nil.
type memoryWatcher interface {
	MemoryGate() scheduler.Capacity
	MemoryCollectors() []prometheus.Collector
}

// serveDeps are what serve runs on: a loaded model and its backend.
type serveDeps struct {
	Model   *runtime.Model
	Backend batch.Backend
	// BackendWhy says why this backend runs ("--backend cpu", "CUDA
	// unavailable: ..."); GetModelInfo reports it after the backend's name.
	BackendWhy string
	// Drafter is --spec draft's draft model (loadDraftModel); nil: serve
	// loads it itself when --spec draft asks for one. Its owner closes it
	// after serve returns.
	Drafter scheduler.Drafter
	Log     *slog.Logger
	// HealthPoll is how often a healthReporter backend is polled; 0: 1s.
	HealthPoll time.Duration
	// TLS is the server's TLS config (nil: plaintext), loaded before
	// anything listens.
	TLS *tls.Config
	// HTTP is the OpenAI-compatible HTTP API's listener (nil: off); serve
	// closes it.
	HTTP net.Listener
	// Force is closed by a second SIGTERM/SIGINT: the drain stops at once
	// (still after the scheduler loop has ended). Nil: never.
	Force <-chan struct{}
}

// serve wires scheduler and server on a built model and backend, listens on
// lis (gRPC) and metricsLis (nil: no metrics), marks itself ready on ready
// (may be nil), and runs until ctx ends; then it drains for c.DrainTimeout
// (or until d.Force is closed). It returns only after the scheduler loop
// and every goroutine it started have ended, so the caller may then Close
// the backend and the model. A drain, timed out or not, returns nil.
func serve(ctx context.Context, c serveConfig, d serveDeps, lis, metricsLis net.Listener, ready chan<- struct{}) error {
	m, b, log := d.Model, d.Backend, d.Log
	if d.HTTP != nil {
		defer d.HTTP.Close() // also when serve fails before serving it
	}
	kv := b.KV()
	reg := prometheus.NewRegistry()
	var capacity scheduler.Capacity
	if w, ok := b.(memoryWatcher); ok {
		capacity = w.MemoryGate()
		for _, col := range w.MemoryCollectors() {
			if err := reg.Register(col); err != nil {
				return fmt.Errorf("registering GPU memory metrics: %w", err)
			}
		}
	}
	if err := registerScratchMetrics(reg); err != nil {
		return err
	}
	backendInfo := b.Name()
	if d.BackendWhy != "" {
		backendInfo += "; " + d.BackendWhy
	}
	pooling, why := embedPooling(m, c.EmbedPooling)
	if c.Spec.Source == scheduler.SpecDraft {
		if d.Drafter == nil {
			dm, closeDraft, err := loadDraftModel(c, m, kv, log)
			if err != nil {
				return err
			}
			defer closeDraft() // after the scheduler loop: deferred before it starts
			d.Drafter = dm
		}
		c.Spec.Drafter = d.Drafter
	}
	// The scheduler caps the model's context at what one sequence can hold
	// in the batching mode (Limits().ContextLen); both doors take it from
	// there.
	sched, err := scheduler.New(scheduler.Config{
		BlockSize:      kv.BlockSize,
		NumBlocks:      kv.NumBlocks,
		KVWindows:      kv.Windows,
		MaxSeqs:        c.MaxSeqs,
		MaxBatchTokens: c.MaxBatchTokens,
		MaxWaiting:     c.MaxWaiting,
		ContextLen:     m.HP.ContextLen,
		Batching:       c.Batching,
		BatchSize:      c.BatchSize,
		NewDecoder:     func() scheduler.TextDecoder { return m.Tok.NewStreamDecoder() },
		IsEOG:          m.Tok.IsEOG,
		VocabSize:      m.HP.VocabSize,
		Capacity:       capacity,
		Spec:           c.Spec,
		Pooling:        pooling,
	}, runtime.NewEngine(b, m.HP.VocabSize))
	if err != nil {
		return err
	}
	if l := sched.Limits(); l.EmbedDim > 0 {
		log.Info("embeddings", "dimensions", l.EmbedDim, "pooling", l.Pooling.String(), "from", why)
	} else {
		log.Info("embeddings not served", "why", l.NoEmbeddings)
	}
	ctxLen := sched.Limits().ContextLen
	cc, err := chooseChatTemplate(c.ChatTemplate, m)
	if err != nil {
		return err
	}
	if cc.Why != "" {
		log.Warn("chat template", "choice", cc.Why)
	}
	// One Door for the process: every front door shares its tokenize
	// bound, caches, request ids, stream following and metrics.
	door, err := frontdoor.New(frontdoor.Config{
		Tokenizer:      m.Tok,
		Chat:           cc.Template,
		Limits:         sched.Limits(),
		MaxPromptBytes: int(c.MaxPromptBytes),
		ToolFormat:     c.ToolFormat,
		Registry:       reg,
		Logger:         log,
	})
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{
		Scheduler:    sched,
		Door:         door,
		Tokenizer:    m.Tok,
		ChatFallback: cc.Fallback,
		Info: server.ModelInfo{
			Name:         m.Name,
			Architecture: m.HP.Arch,
			VocabSize:    m.HP.VocabSize,
			TensorTypes:  m.TensorTypes,
			Backend:      backendInfo,
			KV:           server.KVCache{BlockSize: kv.BlockSize, NumBlocks: kv.NumBlocks, BytesPerBlock: kv.BytesPerBlock, Type: kv.Type},
			BOS:          m.Tok.BOS(),
			EOG:          m.Tok.EOGs(),
		},
		AuthToken: c.AuthToken,
		TLS:       d.TLS,
		Registry:  reg,
	})
	if err != nil {
		return err
	}
	var api *openai.Handler
	var msgAPI *anthropic.Handler
	if d.HTTP != nil {
		api, err = openai.New(openai.Config{
			Scheduler:  sched,
			Door:       door,
			Tokenizer:  m.Tok,
			ModelNames: servedNames(c.ServedNames, m.Name),
			AuthToken:  c.AuthToken,
			Registry:   reg,
		})
		if err != nil {
			return err
		}
		// Anthropic's Messages API on the same listener: one mux, one
		// TLS config, request ids, HTTP metrics and drain.
		msgAPI, err = anthropic.New(anthropic.Config{
			Scheduler:  sched,
			Door:       door,
			ModelNames: servedNames(c.ServedNames, m.Name),
			AuthToken:  c.AuthToken,
		})
		if err != nil {
			return err
		}
		for _, p := range anthropic.Routes {
			api.Mount(p, msgAPI)
		}
	}

	// The scheduler loop, the stats sampler and the health watcher end
	// when runCtx does; serve waits for all three before it returns, so
	// the caller's deferred Close of model and backend never runs under a
	// forward pass.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	runDone := make(chan error, 1)
	var bg sync.WaitGroup
	bg.Go(func() { runDone <- sched.Run(runCtx) })
	bg.Go(func() { srv.SampleStats(runCtx, 100*time.Millisecond) })
	defer func() {
		stopRun()
		bg.Wait()
	}()

	var metricsSrv *http.Server
	if metricsLis != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", srv.MetricsHandler())
		if c.Pprof {
			mountPprof(mux)
		}
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		bg.Go(func() { metricsSrv.Serve(metricsLis) }) // ends at metricsSrv.Close below
		defer metricsSrv.Close()
		log.Info("metrics", "addr", metricsLis.Addr().String())
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }() // ends at srv.Shutdown / Stop below
	var httpSrv *http.Server
	httpErr := make(chan error, 1)
	if api != nil {
		httpSrv = &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, TLSConfig: d.TLS}
		go func() { // ends at httpSrv.Shutdown / Close below
			if d.TLS != nil {
				httpErr <- httpSrv.ServeTLS(d.HTTP, "", "")
			} else {
				httpErr <- httpSrv.Serve(d.HTTP)
			}
		}()
		api.SetServing(true)
		msgAPI.SetServing(true)
		log.Info("openai http api", "addr", d.HTTP.Addr().String(), "tls", d.TLS != nil)
	}
	srv.SetServing(true)
	if h, ok := b.(healthReporter); ok {
		bg.Go(func() { watchHealth(runCtx, h, d.HealthPoll, srv, log) })
	}
	log.Info("serving", "addr", lis.Addr().String(), "model", m.Name, "backend", backendInfo,
		"kv_blocks", kv.NumBlocks, "block_size", kv.BlockSize, "context", ctxLen, "tls", d.TLS != nil)
	if ready != nil {
		close(ready)
	}

	var err2 error
	schedDone := false
	select {
	case <-ctx.Done():
	case err2 = <-serveErr:
		serveErr = nil
	case err2 = <-runDone:
		schedDone = true
		err2 = fmt.Errorf("scheduler stopped: %w", err2)
	}
	// Drain: health NOT_SERVING (still readable), new calls refused with
	// DRAINING, the listener open; in-flight requests go on until they
	// end, the drain timeout passes or a second signal comes.
	srv.BeginDrain()
	if api != nil {
		api.BeginDrain()
		msgAPI.BeginDrain()
	}
	force := d.Force
	if err2 == nil {
		log.Info("shutting down: draining", "timeout", c.DrainTimeout)
		timer := time.NewTimer(c.DrainTimeout)
		select {
		case <-sched.Drained():
			log.Info("drain complete")
		case <-timer.C:
			log.Warn("drain timeout passed; cancelling the remaining requests")
		case <-force:
			log.Warn("second signal: stopping now")
		case err2 = <-runDone:
			schedDone = true
			err2 = fmt.Errorf("scheduler stopped: %w", err2)
		}
		timer.Stop()
	}
	// Stop the scheduler and wait for its loop (and any forward pass in
	// it) to end; requests still in flight end with DRAINING.
	stopRun()
	if !schedDone {
		<-runDone
	}
	// Let the handlers send their last messages (each stream's end), then
	// close the port; after a second signal only briefly, and a signal
	// during the flush closes it at once.
	flush := shutdownFlush
	if isClosed(force) {
		force, flush = nil, forcedFlush
	}
	flushCtx, cancel := context.WithTimeout(context.Background(), flush)
	go func() { // ends when flushCtx does (Shutdown returned or timed out) or on force
		select {
		case <-force:
			cancel()
		case <-flushCtx.Done():
		}
	}()
	var httpDone sync.WaitGroup
	if httpSrv != nil {
		// The HTTP handlers end like the gRPC ones: each has its last
		// message (or the stream's error) to write, then the port closes;
		// whatever is left when flushCtx ends is cut off.
		httpDone.Go(func() {
			if httpSrv.Shutdown(flushCtx) != nil {
				httpSrv.Close()
			}
		})
	}
	srv.Shutdown(flushCtx)
	httpDone.Wait()
	cancel()
	if httpSrv != nil {
		if err := <-httpErr; err2 == nil && err != nil && !errors.Is(err, http.ErrServerClosed) {
			err2 = err
		}
	}
	if serveErr != nil {
		if err := <-serveErr; err2 == nil && err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			err2 = err
		}
	}
	return err2
}

// embedPooling is how embeddings pool: the model file's pooling_type
// when it names mean, cls or last, else --embed-pooling (validated). why
// says which, for the log.
func embedPooling(m *runtime.Model, flagValue string) (p batch.Pooling, why string) {
	if m.Pooling != batch.PoolingUnset {
		return m.Pooling, "the model file's pooling_type"
	}
	p, _ = batch.ParsePooling(flagValue)
	if m.PoolingType >= 0 {
		return p, fmt.Sprintf("--embed-pooling (the file's pooling_type %d names no pooling into one vector)", m.PoolingType)
	}
	return p, "--embed-pooling"
}

// shutdownFlush is how long handlers may take to send their last messages
// once the scheduler has stopped.
const shutdownFlush = 2 * time.Second

// forcedFlush is shutdownFlush after a second signal.
const forcedFlush = 200 * time.Millisecond

// isClosed reports whether ch is closed (a nil ch never is).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// watchHealth polls h every poll (0: 1s) until ctx ends; the first time h
// reports unhealthy (a sticky CUDA error) it turns srv's health NOT_SERVING
// and logs the reason. It does not turn it back: such errors are permanent.
func watchHealth(ctx context.Context, h healthReporter, poll time.Duration, srv *server.Server, log *slog.Logger) {
	if poll <= 0 {
		poll = time.Second
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ok, reason := h.Healthy(); !ok {
			srv.SetServing(false)
			log.Error("backend unhealthy; health is NOT_SERVING", "reason", reason)
			return
		}
	}
}

func runServe(ctx context.Context, args []string) error {
	c, err := parseServeFlags(args)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := c.loadSecrets(); err != nil {
		return err
	}
	// TLS is loaded and checked before anything listens: a bad path fails
	// here, before the model loads, and no byte is ever served in clear.
	var tlsCfg *tls.Config
	if c.TLSCert != "" {
		certs, err := newCertStore(c.TLSCert, c.TLSKey)
		if err != nil {
			return err
		}
		tlsCfg = certs.config()
		stopHUP := reloadOnSIGHUP(certs, log)
		defer stopHUP()
	}
	force, stopSignals := forceOnSecondSignal()
	defer stopSignals()
	lis, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	var mlis, hlis net.Listener
	if c.MetricsAddr != "" {
		if mlis, err = net.Listen("tcp", c.MetricsAddr); err != nil {
			lis.Close()
			return err
		}
	}
	if c.HTTPAddr != "" {
		if hlis, err = net.Listen("tcp", c.HTTPAddr); err != nil {
			lis.Close()
			if mlis != nil {
				mlis.Close()
			}
			return err
		}
	}
	return loadAndServe(ctx, c, serveDeps{Log: log, TLS: tlsCfg, Force: force, HTTP: hlis}, lis, mlis, loadServeModel, nil)
}

// forceOnSecondSignal returns a channel closed at the second SIGTERM or
// SIGINT (the first one ends main's context and starts the drain). stop
// ends the watching goroutine.
func forceOnSecondSignal() (force <-chan struct{}, stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	f := make(chan struct{})
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() { // ends at stop
		defer close(exited)
		for n := 0; ; {
			select {
			case <-sigs:
				if n++; n == 2 {
					close(f)
				}
			case <-done:
				return
			}
		}
	}()
	return f, func() {
		signal.Stop(sigs)
		close(done)
		<-exited
	}
}

// loadSecrets reads --auth-token-file into AuthToken.
func (c *serveConfig) loadSecrets() error {
	if c.AuthTokenFile == "" {
		return nil
	}
	tok, err := readTokenFile(c.AuthTokenFile)
	if err != nil {
		return err
	}
	c.AuthToken = tok
	return nil
}

// readTokenFile reads a bearer token from path, without its trailing
// newline. The token itself never appears in an error or a log line.
func readTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--auth-token-file: %w", err)
	}
	tok := strings.TrimRight(string(b), "\r\n")
	if tok == "" {
		return "", fmt.Errorf("--auth-token-file %s: the file is empty", path)
	}
	if strings.ContainsAny(tok, "\r\n") {
		return "", fmt.Errorf("--auth-token-file %s: want one line", path)
	}
	return tok, nil
}

// loadServeModel loads --model, or the built-in model when it is empty.
func loadServeModel(c serveConfig, log *slog.Logger) (*runtime.Model, error) {
	if c.Model == "" {
		m, err := runtime.LoadDefault()
		if err == nil {
			log.Warn(runtime.DefaultModelNotice)
		}
		return m, err
	}
	if c.Backend != "cuda" {
		// Before anything is read: what the CPU backend will hold.
		if e, err := estimateMemory(c, c.Model, log); err == nil {
			e.log(log)
		}
	}
	if err := preloadModel(c.Model, log); err != nil {
		return nil, err
	}
	return runtime.Load(c.Model)
}

// loadAndServe answers health NOT_SERVING on lis while load runs and the
// backend is built, then serves the model on the same socket. base gives
// the logger, the TLS config (used from the first byte, by the loading
// server too) and the force channel; serve gets them with the model.
func loadAndServe(ctx context.Context, c serveConfig, base serveDeps, lis, mlis net.Listener,
	load func(serveConfig, *slog.Logger) (*runtime.Model, error), ready chan<- struct{}) error {
	log := base.Log
	defer startBatchInvariant(c.BatchInvariant)()
	if c.BatchInvariant {
		log.Info("batch-invariant CPU kernels: a sequence's logits do not depend on its batch, its chunking or its place in it (--batch-invariant)")
	}
	shared := shareListener(lis)
	stopLoading := startLoadingServer(shared.view(false), base.TLS, c.AuthToken)
	// The HTTP API's port answers while loading too (503), on the same
	// socket serve then takes over.
	stopLoadingHTTP := func() {}
	if base.HTTP != nil {
		hshared := shareListener(base.HTTP)
		stopLoadingHTTP = startLoadingHTTP(hshared.view(false), base.TLS, c.AuthToken)
		base.HTTP = hshared.view(true)
	}
	log.Info("loading model; health is NOT_SERVING until it is ready", "addr", lis.Addr().String(), "model", c.Model, "tls", base.TLS != nil)
	fail := func(err error) error {
		stopLoading()
		stopLoadingHTTP()
		lis.Close()
		if mlis != nil {
			mlis.Close()
		}
		if base.HTTP != nil {
			base.HTTP.Close()
		}
		return err
	}
	m, err := load(c, log)
	if err != nil {
		return fail(err)
	}
	defer m.Close()
	b, why, err := newBackend(c, m, log)
	if err != nil {
		return fail(err)
	}
	defer b.Close()
	if c.Spec.Source == scheduler.SpecDraft {
		dm, closeDraft, err := loadDraftModel(c, m, b.KV(), log)
		if err != nil {
			return fail(err)
		}
		defer closeDraft()
		base.Drafter = dm
	}
	stopLoading()
	stopLoadingHTTP()
	d := base
	d.Model, d.Backend, d.BackendWhy = m, b, why
	return serve(ctx, c, d, shared.view(true), mlis, ready)
}

// servedNames are the model ids the HTTP API answers to: the
// --served-model-name ids when given, else the model's own name.
func servedNames(flagged []string, name string) []string {
	if len(flagged) > 0 {
		return flagged
	}
	return []string{name}
}

// startLoadingHTTP serves openai.LoadingHandler (anthropic.LoadingHandler on
// the Messages routes) on lis until stop, which
// closes lis (a view: the socket stays open) and the connections.
func startLoadingHTTP(lis net.Listener, tlsCfg *tls.Config, token string) (stop func()) {
	mux := http.NewServeMux()
	mux.Handle("/", openai.LoadingHandler(token))
	for _, p := range anthropic.Routes {
		mux.Handle(p, anthropic.LoadingHandler(token))
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg}
	done := make(chan struct{})
	go func() { // ends at hs.Close in stop
		defer close(done)
		if tlsCfg != nil {
			hs.ServeTLS(lis, "", "")
		} else {
			hs.Serve(lis)
		}
	}()
	return func() {
		hs.Close()
		<-done
	}
}

// toolFormatNames lists the tool-call formats --tool-format takes.
func toolFormatNames() string {
	var names []string
	for _, f := range toolcall.Formats() {
		names = append(names, f.String())
	}
	return strings.Join(names, ", ")
}

// loadDraftModel loads --draft-model, checks that it shares target's
// vocabulary, and builds its drafter: a CPU backend with its own KV pool
// (--draft-kv-blocks, default as many blocks as the target's pool kv).
// closeAll closes the backend and the model, after the scheduler loop.
func loadDraftModel(c serveConfig, target *runtime.Model, kv batch.KVInfo, log *slog.Logger) (d *runtime.DraftModel, closeAll func(), err error) {
	dm, err := runtime.Load(c.DraftModel)
	if err != nil {
		return nil, nil, fmt.Errorf("--draft-model: %w", err)
	}
	if err := runtime.CheckDraftVocab(target, dm); err != nil {
		dm.Close()
		return nil, nil, fmt.Errorf("--draft-model: %w", err)
	}
	blocks := c.DraftKVBlocks
	if blocks == 0 {
		blocks = kv.NumBlocks
	}
	db, err := dm.NewCPUBackend(cpu.Config{BlockSize: kv.BlockSize, NumBlocks: blocks, KVType: "f16"})
	if err != nil {
		dm.Close()
		return nil, nil, fmt.Errorf("--draft-model: %w", err)
	}
	if _, err := placeWeights(dm, c.Weights, log); err != nil {
		db.Close()
		dm.Close()
		return nil, nil, fmt.Errorf("--draft-model: %w", err)
	}
	d, err = runtime.NewDraftModel(db, dm.HP.VocabSize, 0)
	if err != nil {
		db.Close()
		dm.Close()
		return nil, nil, fmt.Errorf("--draft-model: %w", err)
	}
	log.Info("speculative decoding with a draft model", "draft", dm.Name, "path", c.DraftModel, "types", dm.TypeSummary(),
		"kv_blocks", blocks, "block_size", kv.BlockSize, "kv_bytes", int64(blocks)*db.KV().BytesPerBlock)
	if dm.HP.ContextLen < target.HP.ContextLen {
		log.Warn("the draft model's context is shorter than the target's: drafts past it come from positions it was not trained for",
			"draft_context", dm.HP.ContextLen, "target_context", target.HP.ContextLen)
	}
	return d, func() {
		db.Close()
		dm.Close()
	}, nil
}
