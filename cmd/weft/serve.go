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
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/llama"
	"github.com/weft-inference/weft/scheduler"
	"github.com/weft-inference/weft/server"
)

func init() {
	register(command{name: "serve", short: "serve a model over gRPC", run: runServe})
	register(command{name: "healthcheck", short: "probe a server's gRPC health (for container HEALTHCHECK)", run: runHealthcheck})
}

// serveConfig is `weft serve`'s flags.
type serveConfig struct {
	Model          string        // GGUF path; "" serves the built-in model
	Addr           string        // gRPC listen address
	MetricsAddr    string        // Prometheus /metrics address; "" disables
	Backend        string        // auto, cpu or cuda
	Batching       string        // continuous or static
	MaxSeqs        int           // running sequences per batch
	BatchSize      int           // static batching group size
	MaxBatchTokens int           // tokens per step
	MaxWaiting     int           // waiting queue bound
	KVMemory       int64         // bytes for the KV pool (0: backend default)
	DrainTimeout   time.Duration // graceful shutdown deadline
	AuthToken      string        // bearer token; "" disables auth
	TLSCert        string        // PEM certificate; with TLSKey enables TLS
	TLSKey         string        // PEM key
	LogLevel       string        // debug, info, warn, error
}

func (c *serveConfig) validate() error {
	switch c.Backend {
	case "auto", "cpu", "cuda":
	default:
		return fmt.Errorf("--backend %q: want auto, cpu or cuda", c.Backend)
	}
	switch c.Batching {
	case scheduler.BatchingContinuous, scheduler.BatchingStatic:
	default:
		return fmt.Errorf("--batching %q: want continuous or static", c.Batching)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if c.DrainTimeout <= 0 {
		return fmt.Errorf("--drain-timeout %v must be > 0", c.DrainTimeout)
	}
	if c.MaxSeqs < 0 || c.BatchSize < 0 || c.MaxBatchTokens < 0 || c.MaxWaiting < 0 || c.KVMemory < 0 {
		return errors.New("sizes must be >= 0 (0: default)")
	}
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
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "127.0.0.1:9090", "Prometheus /metrics `host:port` (empty: off)")
	fs.StringVar(&c.Backend, "backend", "auto", "compute backend: auto, cpu or cuda")
	fs.StringVar(&c.Batching, "batching", scheduler.BatchingContinuous, "continuous or static")
	fs.IntVar(&c.MaxSeqs, "max-seqs", 0, "most sequences in one batch (0: scheduler default)")
	fs.IntVar(&c.BatchSize, "batch-size", 0, "group size for --batching static (0: max-seqs)")
	fs.IntVar(&c.MaxBatchTokens, "max-batch-tokens", 0, "most tokens fed in one step (0: scheduler default)")
	fs.IntVar(&c.MaxWaiting, "max-waiting", 0, "most requests waiting for admission (0: scheduler default)")
	fs.Var(byteSize{&c.KVMemory}, "kv-memory", "bytes for the KV cache pool, e.g. 256MiB (0: backend default)")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 30*time.Second, "how long in-flight streams may finish on SIGTERM")
	fs.StringVar(&c.AuthToken, "auth-token", "", "require `token` as a bearer token (health is exempt)")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM certificate `file` (with --tls-key: serve TLS)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM private key `file`")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return c, c.validate()
}

// newCUDABackend is the CUDA hook: the cuda package's wiring sets it (in a
// file built with cgo) to build a backend for m with a KV pool of kvBytes
// (0: its default). Nil means this binary has no CUDA support.
//
// CUDA HOOK: cuda/ provides the implementation; keep the signature.
var newCUDABackend func(m *runtime.Model, kvBytes int64, log *slog.Logger) (runtime.Backend, error)

// errNoCUDA is returned for --backend cuda when CUDA is unavailable.
var errNoCUDA = errors.New("--backend cuda: this weft binary has no CUDA support (built without cgo/CUDA) or no GPU was found")

// kvBytesPerBlock is the CPU KV pool's bytes per block (K and V, all layers).
func kvBytesPerBlock(hp llama.HParams, blockSize int, elem int64) int64 {
	return 2 * int64(hp.Layers) * int64(blockSize) * int64(hp.KVHeads*hp.HeadDim) * elem
}

// newBackend picks the backend for m.
func newBackend(c serveConfig, m *runtime.Model, log *slog.Logger) (runtime.Backend, error) {
	if c.Backend == "cuda" || c.Backend == "auto" {
		if newCUDABackend != nil {
			b, err := newCUDABackend(m, c.KVMemory, log)
			if err == nil {
				return b, nil
			}
			if c.Backend == "cuda" {
				return nil, fmt.Errorf("--backend cuda: %w", err)
			}
			log.Info("CUDA unavailable; using the CPU backend", "reason", err)
		} else if c.Backend == "cuda" {
			return nil, errNoCUDA
		} else {
			log.Info("no CUDA support in this binary; using the CPU backend")
		}
	}
	cfg := llama.CPUConfig{BlockSize: 16, KVType: "f16"}
	if c.KVMemory > 0 {
		per := kvBytesPerBlock(m.HP, cfg.BlockSize, 2)
		cfg.NumBlocks = int(c.KVMemory / per)
		if cfg.NumBlocks < 2 {
			return nil, fmt.Errorf("--kv-memory %d bytes holds %d blocks of %d bytes; need at least 2", c.KVMemory, cfg.NumBlocks, per)
		}
	}
	return m.NewCPUBackend(cfg)
}

// serveDeps are what serve runs on: a loaded model and its backend.
type serveDeps struct {
	Model   *runtime.Model
	Backend runtime.Backend
	Log     *slog.Logger
}

// serve wires scheduler and server on a built model and backend, listens on
// lis (gRPC) and metricsLis (nil: no metrics), marks itself ready on ready
// (may be nil), and runs until ctx ends; then it drains for c.DrainTimeout.
func serve(ctx context.Context, c serveConfig, d serveDeps, lis, metricsLis net.Listener, ready chan<- struct{}) error {
	m, b, log := d.Model, d.Backend, d.Log
	kv := b.KV()
	ctxLen := min(m.HP.ContextLen, kv.NumBlocks*kv.BlockSize)
	sched, err := scheduler.New(scheduler.Config{
		BlockSize:      kv.BlockSize,
		NumBlocks:      kv.NumBlocks,
		MaxSeqs:        c.MaxSeqs,
		MaxBatchTokens: c.MaxBatchTokens,
		MaxWaiting:     c.MaxWaiting,
		ContextLen:     ctxLen,
		Batching:       c.Batching,
		BatchSize:      c.BatchSize,
		NewDecoder:     func() scheduler.TextDecoder { return m.Tok.NewStreamDecoder() },
		IsEOG:          m.Tok.IsEOG,
		VocabSize:      m.HP.VocabSize,
	}, runtime.NewEngine(b, m.HP.VocabSize))
	if err != nil {
		return err
	}
	var tlsCfg *tls.Config
	if c.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	var chatT server.ChatRenderer
	if m.Template != nil {
		chatT = m.Template
	}
	srv, err := server.New(server.Config{
		Scheduler: sched,
		Tokenizer: m.Tok,
		Chat:      chatT,
		Info: server.ModelInfo{
			Name:         m.Name,
			Architecture: m.HP.Arch,
			ContextLen:   ctxLen,
			VocabSize:    m.HP.VocabSize,
			TensorTypes:  m.TensorTypes,
			Backend:      b.Name(),
			KV:           server.KVCache{BlockSize: kv.BlockSize, NumBlocks: kv.NumBlocks, BytesPerBlock: kv.BytesPerBlock, Type: kv.Type},
			BOS:          m.Tok.BOS(),
			EOG:          m.Tok.EOGs(),
		},
		AuthToken: c.AuthToken,
		TLS:       tlsCfg,
		Logger:    log,
	})
	if err != nil {
		return err
	}

	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	runDone := make(chan error, 1)
	go func() { runDone <- sched.Run(runCtx) }()
	go srv.SampleStats(runCtx, 100*time.Millisecond)

	var metricsSrv *http.Server
	if metricsLis != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", srv.MetricsHandler())
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go metricsSrv.Serve(metricsLis)
		log.Info("metrics", "addr", metricsLis.Addr().String())
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	srv.SetServing(true)
	log.Info("serving", "addr", lis.Addr().String(), "model", m.Name, "backend", b.Name(),
		"kv_blocks", kv.NumBlocks, "block_size", kv.BlockSize, "context", ctxLen, "tls", tlsCfg != nil)
	if ready != nil {
		close(ready)
	}

	var err2 error
	select {
	case <-ctx.Done():
		log.Info("shutting down: draining", "timeout", c.DrainTimeout)
	case err2 = <-serveErr:
	case err2 = <-runDone:
		err2 = fmt.Errorf("scheduler stopped: %w", err2)
	}
	drainCtx, cancel := context.WithTimeout(context.Background(), c.DrainTimeout)
	defer cancel()
	srv.Shutdown(drainCtx)
	if metricsSrv != nil {
		metricsSrv.Shutdown(drainCtx)
	}
	stopRun()
	return err2
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
	var m *runtime.Model
	if c.Model == "" {
		m, err = runtime.LoadDefault()
		if err == nil {
			log.Warn(runtime.DefaultModelNotice)
		}
	} else {
		m, err = runtime.Load(c.Model)
	}
	if err != nil {
		return err
	}
	defer m.Close()
	if m.TemplateErr != nil {
		log.Warn("chat template did not compile; using the default", "err", m.TemplateErr)
	}
	b, err := newBackend(c, m, log)
	if err != nil {
		return err
	}
	defer b.Close()
	lis, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	var mlis net.Listener
	if c.MetricsAddr != "" {
		if mlis, err = net.Listen("tcp", c.MetricsAddr); err != nil {
			lis.Close()
			return err
		}
	}
	return serve(ctx, c, serveDeps{Model: m, Backend: b, Log: log}, lis, mlis, nil)
}

// runHealthcheck dials the health service and exits non-zero unless the
// server reports SERVING. Flags: --addr, --timeout, --tls (skip-verify TLS,
// for a local probe of a TLS server).
func runHealthcheck(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:50051", "server `host:port`")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	useTLS := fs.Bool("tls", false, "use TLS without verifying the certificate (local probes only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	creds := insecure.NewCredentials()
	if *useTLS {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // local liveness probe
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: server.ServiceName})
	if err != nil {
		return err
	}
	if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s is %v", *addr, r.GetStatus())
	}
	fmt.Println("SERVING")
	return nil
}
