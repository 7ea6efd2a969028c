package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/weft-inference/weft/cuda/gpumem"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/kernels"
)

// runEngineBench is `weft bench --engine`: the forward pass alone, in
// process, on the CPU backend — prompt tokens/s, single-sequence decode
// tokens/s and aggregate decode tokens/s with several sequences in one
// batch, plus the memory-bandwidth bound of a decode step. It is the
// command-line twin of `go test -bench Forward ./runtime/cpu`, for any
// GGUF file (for example one written by `weft gen-model`).
func runEngineBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench --engine", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Bool("engine", true, "benchmark the forward pass in process (no server)")
	modelPath := fs.String("model", "", "GGUF model (empty: the built-in model)")
	seqsFlag := fs.String("seqs", "1,4,16,64", "decode batch sizes (sequences per step)")
	promptLen := fs.Int("prompt", 128, "prompt chunk length for the prompt benchmark")
	ctxLen := fs.Int("context", 64, "tokens already in each sequence's KV before decoding")
	steps := fs.Int("steps", 16, "decode steps measured per batch size")
	reps := fs.Int("prompt-reps", 5, "prompt chunks measured (after one warm-up)")
	bandwidth := fs.Float64("bandwidth-gbs", 0, "memory bandwidth (GB/s) for the stated decode bound (0: measure it on every compute thread, a streaming read well beyond the last-level cache and an in-cache read of half of it, and take the one the weights' size calls for)")
	gflops := fs.Float64("gflops", 0, "float arithmetic peak (GFLOP/s) for the stated compute bound (0: measure it, vfmadd231ps chains in registers on every compute thread)")
	int8Gops := fs.Float64("int8-gops", 0, "int8 peak (G multiply-adds x 2 per s) for the weights kernels.Int8Products names (Q8_0, Q4_K, Q6_K on AVX-512 VNNI CPUs), whose products run as int8 dot products (0: measure it, vpdpbusd chains)")
	format := fs.String("format", "table", "table or json")
	kernelSet := fs.String("kernels", "", "CPU kernel set to run (empty: the best this CPU has; weft version lists them), to compare kernel sets on one machine")
	backendFlag := fs.String("backend", "cpu", "compute backend: cpu, cuda, or auto (CUDA when this binary has it and a GPU answers); the stated bounds are the CPU's")
	invariant := fs.Bool("batch-invariant", false, batchInvariantUsage)
	kvType := fs.String("kv-type", "f16", kvTypeUsage)
	weights := fs.String("weights", "auto", weightsUsage)
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile (pprof) of the timed decode steps of the last --seqs count to `FILE`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var seqCounts []int
	for _, s := range strings.Split(*seqsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("--seqs: bad count %q", s)
		}
		seqCounts = append(seqCounts, n)
	}
	switch *backendFlag {
	case "auto", "cpu", "cuda":
	default:
		return fmt.Errorf("--backend must be auto, cpu or cuda, got %q", *backendFlag)
	}
	if *invariant && *backendFlag == "cuda" {
		return errBatchInvariantCUDA("--backend cuda")
	}
	if err := checkWeights(*weights); err != nil {
		return err
	}
	if err := checkKVType(*kvType, *backendFlag); err != nil {
		return err
	}
	defer startBatchInvariant(*invariant)()
	if *kernelSet != "" {
		if _, err := kernels.UseISA(*kernelSet); err != nil {
			return fmt.Errorf("--kernels: %w", err)
		}
	}
	if *promptLen < 1 || *ctxLen < 0 || *steps < 1 || *reps < 1 {
		return fmt.Errorf("--prompt, --steps, --prompt-reps must be >= 1 and --context >= 0")
	}
	// pk holds the measured peaks; the bandwidth for the bound is chosen
	// from them once the weights' size is known.
	pk := kernels.Peaks{LLCBytes: kernels.LastLevelCache()}
	measuredBW := *bandwidth <= 0
	if *bandwidth <= 0 || *gflops <= 0 || *int8Gops <= 0 {
		// Measured before the model is loaded, with nothing else running.
		pk = kernels.MeasurePeaks()
		if *gflops <= 0 {
			*gflops = pk.GFLOPS
		}
		if *int8Gops <= 0 {
			*int8Gops = pk.Int8GOPS
		}
		if *gflops <= 0 { // no SIMD kernels: a nominal figure keeps the bound finite
			*gflops = 1
		}
	}
	var (
		m   *runtime.Model
		err error
	)
	if *modelPath == "" {
		m, err = runtime.LoadDefault()
	} else {
		m, err = runtime.Load(*modelPath)
	}
	if err != nil {
		return err
	}
	defer m.Close()
	hp := m.HP
	// weightBytes is what a decode step must read; flopsPerToken counts the
	// matrix products (2 FLOP per weight; the embedding is a lookup).
	// secsPerToken is the compute bound's time per token: each product's
	// FLOPs at the peak of the instructions its kernel uses (int8 dot
	// products where kernels.Int8Products says so, float FMAs otherwise).
	var weightBytes int64
	// outSecs is the output matrix's share: a prompt chunk computes logits
	// for its last token only, so its bound leaves the rest out.
	var flopsPerToken, secsPerToken, outSecs float64
	int8 := false
	addFLOPs := func(ti *gguf.TensorInfo, output bool) {
		f := 2 * float64(ti.NumElements())
		flopsPerToken += f
		s := f / (*gflops * 1e9)
		if kernels.Int8Products(ti.Type, int(ti.Dims[0])) && *int8Gops > 0 {
			int8 = true
			s = f / (*int8Gops * 1e9)
		}
		secsPerToken += s
		if output {
			outSecs += s
		}
	}
	for i := range m.File.Tensors {
		ti := &m.File.Tensors[i]
		weightBytes += int64(len(ti.Data))
		if len(ti.Dims) == 2 && ti.Name != "token_embd.weight" {
			addFLOPs(ti, ti.Name == "output.weight")
		}
	}
	if _, separate := m.File.Tensor("output.weight"); !separate {
		if emb, ok := m.File.Tensor("token_embd.weight"); ok { // tied output
			addFLOPs(emb, true)
		}
	}
	bwWhy := "--bandwidth-gbs"
	if measuredBW {
		*bandwidth, bwWhy = pk.DecodeBandwidth(weightBytes)
	}
	computeBound := 1 / secsPerToken
	promptBound := 1 / (secsPerToken - outSecs + outSecs/float64(*promptLen))
	vocab := hp.VocabSize
	maxSeqs := 1
	for _, n := range seqCounts {
		maxSeqs = max(maxSeqs, n)
	}
	// newBackend builds the chosen backend with room for seqs sequences of
	// perSeq tokens each and returns the blocks per sequence.
	var backendName, backendWhy string
	newBackend := func(seqs, tokens int) (batch.Backend, int, error) {
		const bs = batch.DefaultBlockSize
		b, why, err := pickBackend(m, kvBackend(*backendFlag, *kvType), *invariant, *weights,
			cudaOptions{Utilization: gpumem.DefaultUtilization, MaxSeqs: seqs, MaxBatchTokens: max(*promptLen, maxSeqs)},
			func() (cpu.Config, error) {
				return cpu.Config{BlockSize: bs, NumBlocks: seqs * ((tokens + bs - 1) / bs), KVType: *kvType}, nil
			},
			slog.New(slog.DiscardHandler))
		if err != nil {
			return nil, 0, err
		}
		kv := b.KV()
		perSeq := (tokens + kv.BlockSize - 1) / kv.BlockSize
		if seqs*perSeq > kv.NumBlocks {
			b.Close()
			return nil, 0, fmt.Errorf("%d sequences of %d tokens need %d KV blocks; the %s backend has %d", seqs, tokens, seqs*perSeq, b.Name(), kv.NumBlocks)
		}
		backendName, backendWhy = b.Name(), why
		return b, perSeq, nil
	}
	tok := func(i int) int32 { return int32(3 + i%(vocab-3)) }

	type row struct {
		Name         string  `json:"name"`
		Seqs         int     `json:"seqs"`
		TokensPerSec float64 `json:"tokens_per_second"`
		StepMS       float64 `json:"step_ms"`
		BoundPerSec  float64 `json:"bound_tokens_per_second"`
		BoundKind    string  `json:"bound"` // "bandwidth" or "compute"
	}
	var rows []row

	// Prompt: one chunk of promptLen tokens per step.
	{
		b, nb, err := newBackend(1, *promptLen)
		if err != nil {
			return err
		}
		st := batch.SeqStep{Tokens: make([]int32, *promptLen)}
		for i := range st.Tokens {
			st.Tokens[i] = tok(i)
		}
		for i := range nb {
			st.Blocks = append(st.Blocks, int32(i))
		}
		lg := [][]float32{make([]float32, vocab)}
		seqs := []batch.SeqStep{st}
		if err := b.Forward(ctx, seqs, lg); err != nil { // warm-up
			b.Close()
			return err
		}
		t0 := time.Now()
		for range *reps {
			if err := b.Forward(ctx, seqs, lg); err != nil {
				b.Close()
				return err
			}
		}
		el := time.Since(t0)
		b.Close()
		rows = append(rows, row{Name: fmt.Sprintf("prompt %d", *promptLen), Seqs: 1,
			TokensPerSec: float64(*reps**promptLen) / el.Seconds(), StepMS: el.Seconds() * 1000 / float64(*reps),
			BoundPerSec: promptBound, BoundKind: "compute"})
	}

	// Decode: n sequences, each with ctxLen tokens of context, one token each per step.
	for _, n := range seqCounts {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, perSeq, err := newBackend(n, *ctxLen+*steps+1)
		if err != nil {
			return err
		}
		seqs := make([]batch.SeqStep, n)
		lg := make([][]float32, n)
		for i := range seqs {
			for j := range perSeq {
				seqs[i].Blocks = append(seqs[i].Blocks, int32(i*perSeq+j))
			}
			lg[i] = make([]float32, vocab)
			if *ctxLen > 0 {
				pre := batch.SeqStep{Blocks: seqs[i].Blocks, Tokens: make([]int32, *ctxLen)}
				for k := range pre.Tokens {
					pre.Tokens[k] = tok(i + k)
				}
				if err := b.Forward(ctx, []batch.SeqStep{pre}, [][]float32{nil}); err != nil {
					b.Close()
					return err
				}
			}
			seqs[i].Pos = *ctxLen
			seqs[i].Tokens = []int32{tok(i)}
		}
		var el time.Duration
		profiled := false
		for s := 0; s <= *steps; s++ {
			if s == 1 && *cpuProfile != "" && n == seqCounts[len(seqCounts)-1] {
				f, err := os.Create(*cpuProfile)
				if err == nil {
					err = pprof.StartCPUProfile(f)
				}
				if err != nil {
					b.Close()
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				profiled = true
				defer func() { pprof.StopCPUProfile(); f.Close() }() // a no-op stop once stopped below
			}
			t0 := time.Now()
			if err := b.Forward(ctx, seqs, lg); err != nil {
				b.Close()
				return err
			}
			if s > 0 { // step 0 is warm-up
				el += time.Since(t0)
			}
			for i := range seqs {
				seqs[i].Pos++
				seqs[i].Tokens[0] = tok(i + s)
			}
		}
		if profiled {
			pprof.StopCPUProfile()
		}
		b.Close()
		bound, kind := *bandwidth*1e9/float64(weightBytes)*float64(n), "bandwidth"
		if computeBound < bound {
			bound, kind = computeBound, "compute"
		}
		rows = append(rows, row{Name: "decode", Seqs: n,
			TokensPerSec: float64(n**steps) / el.Seconds(), StepMS: el.Seconds() * 1000 / float64(*steps),
			BoundPerSec: bound, BoundKind: kind})
	}

	if *format == "json" {
		return json.NewEncoder(stdout).Encode(map[string]any{
			"model": m.Name, "types": m.TypeSummary(), "weight_bytes": weightBytes, "kernels": kernels.ISA(), "threads": kernels.Workers(),
			"backend":       backendName + "; " + backendWhy,
			"bandwidth_gbs": *bandwidth, "bandwidth_why": bwWhy, "llc_bytes": pk.LLCBytes,
			"stream_bandwidth_gbs": pk.BandwidthGBs, "cache_bandwidth_gbs": pk.CacheBandwidthGBs,
			"gflops": *gflops, "int8_gops": *int8Gops, "flops_per_token": flopsPerToken, "results": rows,
			// kv_bytes_per_token: the keys and values (of --kv-type) one
			// token of context holds over all layers, what a decode step
			// reads per context token of each sequence (full attention on
			// every layer).
			"kv_bytes_per_token": kvBytesPerToken(hp.Layers*2*hp.KVHeads*hp.HeadDim, *kvType), "kv_type": *kvType,
			"context":         *ctxLen,
			"batch_invariant": kernels.BatchInvariant(),
		})
	}
	fmt.Fprintf(stdout, "model %s (%s): %d weight bytes, %.3g FLOP/token; %s kernels, %d compute threads\n",
		m.Name, m.TypeSummary(), weightBytes, flopsPerToken, kernels.ISA(), kernels.Workers())
	fmt.Fprintf(stdout, "backend: %s; %s\n", backendName, backendWhy)
	if measuredBW {
		stream, cache := kernels.BandwidthSets(pk.LLCBytes)
		fmt.Fprintf(stdout, "bandwidth: %.1f GB/s streaming (%s read)", pk.BandwidthGBs, mib(stream))
		if pk.CacheBandwidthGBs > 0 {
			fmt.Fprintf(stdout, ", %.1f GB/s in cache (%s read, last-level cache %s)", pk.CacheBandwidthGBs, mib(cache), mib(pk.LLCBytes))
		}
		fmt.Fprintln(stdout)
	}
	fmt.Fprintf(stdout, "decode bound at %.1f GB/s: %s\n", *bandwidth, bwWhy)
	peak := fmt.Sprintf("%.0f GFLOP/s", *gflops)
	if int8 {
		peak += fmt.Sprintf(" (int8 products: %.0f GOPS)", *int8Gops)
	}
	fmt.Fprintf(stdout, "bound = min(%.0f GB/s / weight bytes x seqs, FLOP per token at %s)\n", *bandwidth, peak)
	fmt.Fprintf(stdout, "%-12s %6s %12s %10s %12s %10s\n", "run", "seqs", "tokens/s", "step ms", "bound t/s", "of bound")
	for _, r := range rows {
		fmt.Fprintf(stdout, "%-12s %6d %12.1f %10.2f %12.0f %9.0f%% (%s)\n", r.Name, r.Seqs, r.TokensPerSec, r.StepMS, r.BoundPerSec, 100*r.TokensPerSec/r.BoundPerSec, r.BoundKind)
	}
	return nil
}

// mib writes n bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
