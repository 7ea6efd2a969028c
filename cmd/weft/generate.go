package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/weft-inference/weft/cuda/gpumem"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/sample"
)

func init() {
	register(command{name: "generate", short: "generate text from a prompt (no server)", run: runGenerate})
}

// generateConfig is what the generate flags select.
type generateConfig struct {
	Model     string
	Prompt    string
	MaxTokens int
	Sampling  sample.Params
	KVType    string
	Weights   string // auto, memory or mapped (checkWeights)
	Threads   int
	Format    string
	Chunk     int    // prompt tokens per forward step
	Backend   string // auto, cpu or cuda
	// BatchInvariant is --batch-invariant: batch-invariant CPU kernels
	// (startBatchInvariant); the CUDA backend is refused.
	BatchInvariant bool
}

func (c *generateConfig) validate() error {
	if c.MaxTokens < 1 {
		return fmt.Errorf("--max-tokens must be at least 1, got %d", c.MaxTokens)
	}
	if c.Format != "text" && c.Format != "json" {
		return fmt.Errorf("--format must be text or json, got %q", c.Format)
	}
	if err := checkWeights(c.Weights); err != nil {
		return err
	}
	if err := checkKVType(c.KVType, c.Backend); err != nil {
		return err
	}
	if c.Threads < 0 {
		return fmt.Errorf("--threads must be >= 0, got %d", c.Threads)
	}
	switch c.Backend {
	case "auto", "cpu", "cuda":
	default:
		return fmt.Errorf("--backend must be auto, cpu or cuda, got %q", c.Backend)
	}
	if c.BatchInvariant && c.Backend == "cuda" {
		return errBatchInvariantCUDA("--backend cuda")
	}
	if c.Chunk < 1 {
		c.Chunk = 512
	}
	return nil
}

// generateResult is the --format json output.
type generateResult struct {
	Model          string  `json:"model"`
	Backend        string  `json:"backend"` // the backend's name; why it was chosen
	PromptTokenIDs []int32 `json:"prompt_token_ids"`
	TokenIDs       []int32 `json:"token_ids"`
	Text           string  `json:"text"`
	FinishReason   string  `json:"finish_reason"`
	PromptMS       float64 `json:"prompt_ms"`
	DecodeMS       float64 `json:"decode_ms"`
	DecodeTPS      float64 `json:"decode_tokens_per_s"`
	// BatchInvariant is true when the products ran batch-invariant
	// (--batch-invariant).
	BatchInvariant bool `json:"batch_invariant,omitempty"`
}

func runGenerate(ctx context.Context, args []string) error {
	return generateCmd(ctx, args, os.Stdout, os.Stderr)
}

func generateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	var c generateConfig
	var temp, topP float64
	var seed uint64
	fs.StringVar(&c.Model, "model", "", "GGUF model file (default: the built-in random-weight model weft-tiny)")
	fs.StringVar(&c.Prompt, "prompt", "", "prompt text (BOS is added; special tokens are parsed)")
	fs.IntVar(&c.MaxTokens, "max-tokens", 64, "tokens to generate at most (at most the context length; generation also ends at the context's end)")
	fs.Float64Var(&temp, "temperature", 0, "sampling temperature (0: greedy)")
	fs.IntVar(&c.Sampling.TopK, "top-k", 0, "top-k filter (0: off)")
	fs.Float64Var(&topP, "top-p", 0, "nucleus filter (0 or 1: off)")
	fs.Uint64Var(&seed, "seed", 0, "sampling seed")
	fs.StringVar(&c.KVType, "kv-type", "f16", kvTypeUsage)
	fs.StringVar(&c.Weights, "weights", "auto", weightsUsage)
	fs.IntVar(&c.Threads, "threads", 0, "worker threads (0: all cores)")
	fs.StringVar(&c.Format, "format", "text", "output: text or json")
	fs.IntVar(&c.Chunk, "prompt-chunk", 512, "prompt tokens per forward step")
	fs.StringVar(&c.Backend, "backend", "auto", "compute backend: auto (CUDA when this binary has it and a GPU answers, else CPU), cpu or cuda")
	fs.BoolVar(&c.BatchInvariant, "batch-invariant", false, batchInvariantUsage)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.Sampling.Temperature = float32(temp)
	c.Sampling.TopP = float32(topP)
	c.Sampling.Seed = seed
	if err := c.validate(); err != nil {
		return err
	}
	if c.Threads > 0 {
		setComputeThreads(c.Threads)
	}
	defer startBatchInvariant(c.BatchInvariant)()
	m, err := loadModelOrBuiltin(c.Model)
	if err != nil {
		return err
	}
	defer m.Close()
	res, err := generate(ctx, m, c, stdout, stderr)
	if err != nil {
		return err
	}
	if c.Format == "json" {
		enc := json.NewEncoder(stdout)
		return enc.Encode(res)
	}
	return nil
}

// loadModelOrBuiltin loads path, or the built-in model when path is empty.
func loadModelOrBuiltin(path string) (*runtime.Model, error) {
	if path == "" {
		m, err := runtime.LoadDefault()
		if err != nil {
			return nil, err
		}
		slog.Warn(runtime.DefaultModelNotice)
		return m, nil
	}
	if err := preloadModel(path, slog.Default()); err != nil {
		return nil, err
	}
	return runtime.Load(path)
}

// generate runs one sequence through a CPU backend and the engine: the
// prompt in chunks, then one token per step until an end-of-generation
// token, MaxTokens or the end of the context. In text format the text is
// streamed to out. It says on stderr which backend runs and why.
func generate(ctx context.Context, m *runtime.Model, c generateConfig, out, stderr io.Writer) (*generateResult, error) {
	if err := c.Sampling.Validate(m.HP.VocabSize); err != nil {
		return nil, err
	}
	prompt := m.Tok.Encode(c.Prompt, true, true)
	if len(prompt) == 0 {
		return nil, errors.New("the prompt encodes to no tokens")
	}
	// The context bounds prompt plus output, as in the server: max_tokens
	// above the context is refused, a prompt must leave room for one token,
	// and generation ends with "length" at the context's end.
	ctxLen := m.HP.ContextLen
	if c.MaxTokens > ctxLen {
		return nil, fmt.Errorf("--max-tokens %d must be in [1, %d] (the context length)", c.MaxTokens, ctxLen)
	}
	if len(prompt) >= ctxLen {
		return nil, fmt.Errorf("prompt has %d tokens; the context holds %d (prompt plus at least one generated token)", len(prompt), ctxLen)
	}
	maxTokens := min(c.MaxTokens, ctxLen-len(prompt))
	total := len(prompt) + maxTokens
	const bs = batch.DefaultBlockSize
	b, why, err := pickBackend(m, kvBackend(c.Backend, c.KVType), c.BatchInvariant, c.Weights,
		cudaOptions{Utilization: gpumem.DefaultUtilization, MaxSeqs: 1, MaxBatchTokens: c.Chunk},
		func() (cpu.Config, error) {
			return cpu.Config{BlockSize: bs, NumBlocks: (total + bs - 1) / bs, KVType: c.KVType, Threads: c.Threads}, nil
		}, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer b.Close()
	backend := b.Name() + "; " + why
	fmt.Fprintf(stderr, "backend: %s\n", backend)
	kv := b.KV()
	nBlocks := (total + kv.BlockSize - 1) / kv.BlockSize
	if nBlocks > kv.NumBlocks {
		return nil, fmt.Errorf("%d tokens need %d KV blocks; the %s backend has %d", total, nBlocks, b.Name(), kv.NumBlocks)
	}
	blocks := make([]int32, nBlocks)
	for i := range blocks {
		blocks[i] = int32(i)
	}
	eng := runtime.NewEngine(b, m.HP.VocabSize)
	smp := sample.New(c.Sampling, prompt)
	dec := m.Tok.NewStreamDecoder()
	res := &generateResult{Model: m.Name, Backend: backend, PromptTokenIDs: prompt, TokenIDs: []int32{}, FinishReason: "length"}
	start := time.Now()
	pos := 0
	var text []byte
	emit := func(s string) {
		text = append(text, s...)
		if c.Format == "text" {
			io.WriteString(out, s)
		}
	}
	var next int32
	for pos < len(prompt) {
		n := min(c.Chunk, len(prompt)-pos)
		st := batch.SeqStep{Seq: 1, Tokens: prompt[pos : pos+n], Pos: pos, Blocks: blocks}
		var stepSmp *sample.Sampler
		if pos+n == len(prompt) {
			st.Logits, stepSmp = true, smp
		}
		r, err := eng.Step(ctx, []batch.SeqStep{st}, []*sample.Sampler{stepSmp})
		if err != nil {
			return nil, err
		}
		pos += n
		next = r[0].Token
	}
	res.PromptMS = float64(time.Since(start).Microseconds()) / 1000
	decStart := time.Now()
	for {
		if m.Tok.IsEOG(next) {
			res.FinishReason = "eos"
			break
		}
		res.TokenIDs = append(res.TokenIDs, next)
		emit(dec.Add(next))
		if len(res.TokenIDs) == maxTokens {
			break
		}
		st := batch.SeqStep{Seq: 1, Tokens: []int32{next}, Pos: pos, Blocks: blocks, Logits: true}
		r, err := eng.Step(ctx, []batch.SeqStep{st}, []*sample.Sampler{smp})
		if err != nil {
			return nil, err
		}
		pos++
		next = r[0].Token
	}
	emit(dec.Flush())
	if c.Format == "text" {
		io.WriteString(out, "\n")
	}
	res.Text = string(text)
	res.BatchInvariant = kernels.BatchInvariant()
	res.DecodeMS = float64(time.Since(decStart).Microseconds()) / 1000
	if n := len(res.TokenIDs) - 1; n > 0 && res.DecodeMS > 0 {
		res.DecodeTPS = float64(n) / (res.DecodeMS / 1000)
	}
	return res, nil
}
