// Command gpucheck runs weft's CUDA backend against its CPU backend on real
// and generated models and times it, writing a report. It is built on a
// development machine (scripts/gpu-check.sh --prepare puts it in .gpu/) and
// run on a GPU machine that has the NVIDIA driver and cuBLAS but no Go
// (scripts/gpu-check.sh).
//
// Checks, per model:
//   - greedy decoding (prompt in one step, then one token per step) gives the
//     same tokens on CPU and CUDA (required for F32/F16 weights; reported for
//     quantized ones, whose CPU path may quantize activations);
//   - the first step's logits agree within -tol (max |cpu - cuda|; required
//     for F16 weights, where both backends round activations to F16 before
//     the matrix products, reported for the others);
//   - a mixed ragged batch (prompt chunks and decodes together) gives each
//     sequence the same tokens as running it alone;
//
// then prompt and decode throughput at 1, 16, 64 and 256 sequences,
// compared with the memory-bandwidth bound (-bw, 4.8 TB/s for an H200).
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/weft-inference/weft/cuda"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/llama"
	"github.com/weft-inference/weft/runtime/sample"
)

type config struct {
	models      string
	out         string
	libDir      string
	tol         float64
	bw          float64
	steps       int
	batches     string
	promptN     int
	skipPerf    bool
	perfPresets string
}

func main() {
	var c config
	flag.StringVar(&c.models, "models", ".gpu/models", "directory with stories260K*.gguf")
	flag.StringVar(&c.out, "out", os.Getenv("OUT"), "directory for gpucheck.md and gpucheck.json")
	flag.StringVar(&c.libDir, "libdir", "", "directory searched first for libcuda.so.1 and libcublas.so.*")
	flag.Float64Var(&c.tol, "tol", 0.05, "max |logit difference| allowed on the first step for F16 models (reported for the others)")
	flag.Float64Var(&c.bw, "bw", 4.8e12, "device memory bandwidth in bytes/s for the roofline")
	flag.IntVar(&c.steps, "steps", 32, "greedy tokens generated per correctness check")
	flag.StringVar(&c.batches, "batches", "1,16,64,256", "sequence counts for the throughput runs")
	flag.IntVar(&c.promptN, "prompt", 128, "prompt tokens per sequence in the throughput runs")
	flag.BoolVar(&c.skipPerf, "skip-perf", false, "skip the throughput runs")
	flag.StringVar(&c.perfPresets, "perf-presets", "llama-3.2-1b", "gen-model presets timed as F16 (throughput only, after synth-110m's checks)")
	flag.Parse()
	if c.out == "" {
		c.out = "."
	}
	r := &report{Start: time.Now().UTC()}
	err := run(c, r)
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
	}
	r.Pass = len(r.Errors) == 0 && r.failures() == 0
	if werr := r.write(c.out); werr != nil {
		fmt.Fprintln(os.Stderr, "gpucheck: writing report:", werr)
	}
	fmt.Print(r.markdown())
	if !r.Pass {
		os.Exit(1)
	}
}

type check struct {
	Model, Name string
	OK          bool
	Required    bool
	Detail      string
}

type perf struct {
	Model             string
	Graphs            bool // decode steps replayed from CUDA graphs
	Seqs              int
	PromptTokPerS     float64
	DecodeTokPerS     float64
	DecodeStepMS      float64
	BoundStepMS       float64 // bytes read per decode step / bandwidth
	FractionOfBound   float64
	BytesPerDecodeStp float64
}

// profile is one step run operation by operation (cuda.Backend.Profile):
// milliseconds per kind of operation, summed over layers.
type profile struct {
	Model, Step string
	MS          map[string]float64
}

type report struct {
	Start    time.Time
	Device   string
	Checks   []check
	Perf     []perf
	Profiles []profile
	Errors   []string
	Pass     bool
	Seconds  float64
}

func (r *report) failures() int {
	n := 0
	for _, c := range r.Checks {
		if c.Required && !c.OK {
			n++
		}
	}
	return n
}

func (r *report) add(c check) {
	r.Checks = append(r.Checks, c)
	status := "ok"
	if !c.OK {
		status = "FAIL"
		if !c.Required {
			status = "differs (informational)"
		}
	}
	fmt.Fprintf(os.Stderr, "[%s] %s: %s: %s\n", status, c.Model, c.Name, c.Detail)
}

func (r *report) write(dir string) error {
	r.Seconds = time.Since(r.Start).Seconds()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "gpucheck.json"), j, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "gpucheck.md"), []byte(r.markdown()), 0o644)
}

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# weft gpucheck\n\ndevice: %s\nstarted: %s, took %.0f s\nresult: %s\n\n", r.Device, r.Start.Format(time.RFC3339), r.Seconds, map[bool]string{true: "PASS", false: "FAIL"}[r.Pass])
	b.WriteString("| model | check | result | detail |\n|---|---|---|---|\n")
	for _, c := range r.Checks {
		res := "ok"
		if !c.OK {
			res = "FAIL"
			if !c.Required {
				res = "differs (info)"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", c.Model, c.Name, res, c.Detail)
	}
	if len(r.Perf) > 0 {
		b.WriteString("\n| model | decode | seqs | prompt tok/s | decode tok/s | decode step ms | bandwidth-bound step ms | fraction of bound |\n|---|---|---|---|---|---|---|---|\n")
		for _, p := range r.Perf {
			fmt.Fprintf(&b, "| %s | %s | %d | %.0f | %.0f | %.3f | %.3f | %.2f |\n", p.Model, map[bool]string{true: "graphs", false: "eager"}[p.Graphs], p.Seqs, p.PromptTokPerS, p.DecodeTokPerS, p.DecodeStepMS, p.BoundStepMS, p.FractionOfBound)
		}
	}
	for _, p := range r.Profiles {
		fmt.Fprintf(&b, "\nprofile %s, %s (ms; each launch includes one wait of `sync`):", p.Model, p.Step)
		for _, op := range sortedOps(p.MS) {
			fmt.Fprintf(&b, " %s %.3f;", op, p.MS[op])
		}
		b.WriteString("\n")
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "\nERROR: %s\n", e)
	}
	return b.String()
}

type model struct {
	name  string
	m     *llama.Model
	exact bool // F32/F16 weights: tokens must match exactly
	f16   bool // F16 weights: CPU and GPU round activations alike, logits must agree within -tol
	close func()
}

func loadFile(path string, exact bool) (model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return model{}, err
	}
	m, err := llama.FromGGUF(f)
	if err != nil {
		f.Close()
		return model{}, fmt.Errorf("%s: %w", path, err)
	}
	return model{name: filepath.Base(path), m: m, exact: exact, f16: m.Layers[0].Wq.Type == gguf.TypeF16, close: func() { f.Close() }}, nil
}

func generated(preset string, typ gguf.Type) (model, error) {
	cfg, err := llama.Preset(preset)
	if err != nil {
		return model{}, err
	}
	cfg.Type = typ
	var buf bytes.Buffer
	if err := llama.Generate(cfg, &buf); err != nil {
		return model{}, err
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		return model{}, err
	}
	m, err := llama.FromGGUF(f)
	if err != nil {
		return model{}, err
	}
	return model{name: preset + "-" + typ.String(), m: m, exact: typ == gguf.TypeF16 || typ == gguf.TypeF32, f16: typ == gguf.TypeF16, close: func() {}}, nil
}

func run(c config, r *report) error {
	dev, err := cuda.Open(cuda.Config{LibDir: c.libDir})
	if err != nil {
		return fmt.Errorf("cuda.Open: %w", err)
	}
	defer dev.Close()
	r.Device = dev.String()
	fmt.Fprintln(os.Stderr, "device:", r.Device)

	var models []model
	for _, f := range []struct {
		name  string
		exact bool
	}{{"stories260K.gguf", true}, {"stories260K-F16.gguf", true}, {"stories260K-Q8_0.gguf", false}, {"stories260K-Q4_0.gguf", false}} {
		m, err := loadFile(filepath.Join(c.models, f.name), f.exact)
		if err != nil {
			r.Errors = append(r.Errors, err.Error())
			continue
		}
		models = append(models, m)
	}
	for _, t := range []gguf.Type{gguf.TypeF16, gguf.TypeQ8_0} {
		m, err := generated("synth-110m", t)
		if err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("generate synth-110m %v: %v", t, err))
			continue
		}
		models = append(models, m)
	}
	// The same GPU again, launching every kernel itself: graphs vs eager.
	eager, err := cuda.Open(cuda.Config{LibDir: c.libDir, NoGraphs: true})
	if err != nil {
		return fmt.Errorf("cuda.Open (no graphs): %w", err)
	}
	defer eager.Close()
	perfModel := func(m model) {
		if c.skipPerf {
			return
		}
		g, err := throughput(c, r, dev, m)
		if err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("%s throughput: %v", m.name, err))
			return
		}
		if err := profileSteps(r, dev, m); err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("%s profile: %v", m.name, err))
		}
		e, err := throughput(c, r, eager, m)
		if err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("%s throughput (eager): %v", m.name, err))
			return
		}
		r.add(check{Model: m.name, Name: "graphs = eager", Required: true, OK: g == e,
			Detail: fmt.Sprintf("greedy picks of every decode step at %s sequences, replayed from CUDA graphs vs launched kernel by kernel: identical %v", c.batches, g == e)})
	}
	for _, m := range models {
		if err := correctness(c, r, dev, m); err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("%s: %v", m.name, err))
		}
		if strings.HasPrefix(m.name, "synth-110m") {
			perfModel(m)
		}
		m.close()
	}
	for _, p := range strings.Split(c.perfPresets, ",") {
		if p == "" {
			continue
		}
		t0 := time.Now()
		m, err := generated(p, gguf.TypeF16)
		if err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("generate %s F16: %v", p, err))
			continue
		}
		fmt.Fprintf(os.Stderr, "%s: generated in %.1f s\n", m.name, time.Since(t0).Seconds())
		perfModel(m)
		m.close()
	}
	if ok, why := dev.Healthy(); !ok {
		return fmt.Errorf("device unhealthy: %s", why)
	}
	return nil
}

const blockSize = batch.DefaultBlockSize

// seqRun is one sequence being decoded greedily on some backend.
type seqRun struct {
	prompt []int32
	toks   []int32
	blocks []int32
	logits [][]float32 // each step's logits
}

func newSeq(prompt []int32, maxLen int, firstBlock int32) *seqRun {
	n := (maxLen + blockSize - 1) / blockSize
	s := &seqRun{prompt: prompt}
	for i := range n {
		s.blocks = append(s.blocks, firstBlock+int32(i))
	}
	return s
}

// greedy decodes seqs together on b: each sequence's prompt is fed in one
// step (all prompts in the first step, or staggered by start[i] steps so
// prompt chunks and decodes mix), then one token per step. It returns the
// first logits of each sequence.
func greedy(b batch.Backend, seqs []*seqRun, start []int, steps, vocab int) ([][]float32, error) {
	first := make([][]float32, len(seqs))
	ctx := context.Background()
	for step := 0; ; step++ {
		var batchSeqs []batch.SeqStep
		var idx []int
		for i, s := range seqs {
			if step < start[i] || len(s.toks) >= steps {
				continue
			}
			st := batch.SeqStep{Seq: uint64(i), Blocks: s.blocks, Logits: true}
			if len(s.toks) == 0 {
				st.Tokens, st.Pos = s.prompt, 0
			} else {
				st.Tokens, st.Pos = s.toks[len(s.toks)-1:], len(s.prompt)+len(s.toks)-1
			}
			batchSeqs = append(batchSeqs, st)
			idx = append(idx, i)
		}
		if len(batchSeqs) == 0 {
			done := true
			for _, s := range seqs {
				done = done && len(s.toks) >= steps
			}
			if done {
				return first, nil
			}
			continue // a sequence joins later
		}
		logits := make([][]float32, len(batchSeqs))
		for i := range logits {
			logits[i] = make([]float32, vocab)
		}
		if err := b.Forward(ctx, batchSeqs, logits); err != nil {
			return nil, err
		}
		for j, i := range idx {
			if first[i] == nil {
				first[i] = logits[j]
			}
			seqs[i].logits = append(seqs[i].logits, logits[j])
			seqs[i].toks = append(seqs[i].toks, sample.Argmax(logits[j]))
		}
	}
}

// logprobOf is log softmax(v)[i], in float64.
func logprobOf(v []float32, i int32) float32 {
	mx := v[sample.Argmax(v)]
	var sum float64
	for _, x := range v {
		sum += math.Exp(float64(x - mx))
	}
	return float32(float64(v[i]-mx) - math.Log(sum))
}

func prompts(vocab, n int) [][]int32 {
	rng := rand.New(rand.NewPCG(7, 11))
	var out [][]int32
	for i := range n {
		p := []int32{1}
		for range 5 + 7*i {
			p = append(p, int32(3+rng.IntN(vocab-3)))
		}
		out = append(out, p)
	}
	return out
}

func correctness(c config, r *report, dev *cuda.Device, m model) error {
	hp := m.m.HP
	maxLen := 64 + c.steps + 8
	nb := 8 * ((maxLen + blockSize - 1) / blockSize)
	cpuB, err := cpu.New(m.m, cpu.Config{BlockSize: blockSize, NumBlocks: nb, KVType: "f16"})
	if err != nil {
		return err
	}
	defer cpuB.Close()
	gpu, err := cuda.NewBackend(dev, m.m, cuda.KVConfig{BlockSize: blockSize, NumBlocks: nb, MaxBatchTokens: 512, MaxSeqs: 8})
	if err != nil {
		return err
	}
	defer gpu.Close()
	fmt.Fprintln(os.Stderr, m.name, gpu.Plan())
	ps := prompts(hp.VocabSize, 4)
	per := (maxLen + blockSize - 1) / blockSize

	// CPU vs CUDA, one sequence.
	cs := []*seqRun{newSeq(ps[1], maxLen, 0)}
	gs := []*seqRun{newSeq(ps[1], maxLen, 0)}
	cl, err := greedy(cpuB, cs, []int{0}, c.steps, hp.VocabSize)
	if err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	gl, err := greedy(gpu, gs, []int{0}, c.steps, hp.VocabSize)
	if err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	diff := 0.0
	for i := range cl[0] {
		diff = max(diff, math.Abs(float64(cl[0][i]-gl[0][i])))
	}
	// Required for F16 weights only: with F32 weights the GPU still runs F16
	// GEMMs while the CPU stays in F32; quantized CPU paths may quantize
	// activations. Those are reported, and their tokens compared.
	r.add(check{Model: m.name, Name: "first-step logits", Required: m.f16, OK: diff <= c.tol,
		Detail: fmt.Sprintf("max |cpu-cuda| = %.3g (tolerance %.3g)", diff, c.tol)})
	same := 0
	for same < len(cs[0].toks) && cs[0].toks[same] == gs[0].toks[same] {
		same++
	}
	r.add(check{Model: m.name, Name: "greedy tokens cpu = cuda", Required: m.exact, OK: same == c.steps,
		Detail: fmt.Sprintf("%d of %d identical; cpu %v; cuda %v", same, c.steps, cs[0].toks, gs[0].toks)})

	// Sampling on the device: argmax and its logprob against the host's.
	gr, err := gpu.ForwardGreedy(context.Background(), []batch.SeqStep{{Tokens: ps[1], Blocks: newSeq(ps[1], maxLen, int32(7*per)).blocks, Logits: true}})
	if err != nil {
		return fmt.Errorf("cuda greedy: %w", err)
	}
	wantTok, wantLP := sample.Argmax(gl[0]), logprobOf(gl[0], sample.Argmax(gl[0]))
	r.add(check{Model: m.name, Name: "device argmax + logprob", Required: true,
		OK:     gr[0].Token == wantTok && math.Abs(float64(gr[0].Logprob-wantLP)) <= 1e-3,
		Detail: fmt.Sprintf("device %d (%.5f), host on the same logits %d (%.5f)", gr[0].Token, gr[0].Logprob, wantTok, wantLP)})

	// Ragged batch on CUDA vs each sequence alone on CUDA.
	var alone []*seqRun
	for i, p := range ps {
		s := []*seqRun{newSeq(p, maxLen, int32(i*per))}
		if _, err := greedy(gpu, s, []int{0}, c.steps, hp.VocabSize); err != nil {
			return err
		}
		alone = append(alone, s[0])
	}
	var mixed []*seqRun
	for i, p := range ps {
		mixed = append(mixed, newSeq(p, maxLen, int32((4+i)*per)))
	}
	if _, err := greedy(gpu, mixed, []int{0, 1, 3, 7}, c.steps, hp.VocabSize); err != nil {
		return err
	}
	// cuBLAS picks its kernels by the batch's shape, so a sequence's logits
	// in a mixed batch may differ from its logits alone in the last bits;
	// where two tokens are that close, greedy picks may part. Required: the
	// logits agree within -tol at every step up to and including the first
	// step whose picks differ (after it the contexts differ). Reported:
	// whether they are bitwise identical, and each parting's margin.
	ok, bitwise, same, worst := true, true, 0, 0.0
	var parts []string
	for i := range ps {
		a, mx := alone[i], mixed[i]
		for st := 0; st < len(a.toks) && st < len(mx.toks); st++ {
			d := 0.0
			for v := range a.logits[st] {
				d = max(d, math.Abs(float64(a.logits[st][v]-mx.logits[st][v])))
			}
			worst = max(worst, d)
			bitwise = bitwise && d == 0
			if a.toks[st] != mx.toks[st] {
				parts = append(parts, fmt.Sprintf("seq %d parts at step %d: alone %d, mixed %d, margin %.3g, max |diff| %.3g",
					i, st, a.toks[st], mx.toks[st], a.logits[st][a.toks[st]]-a.logits[st][mx.toks[st]], d))
				break
			}
		}
		if fmt.Sprint(a.toks) == fmt.Sprint(mx.toks) {
			same++
		}
	}
	ok = worst <= c.tol
	detail := fmt.Sprintf("%d of %d sequences' %d tokens identical; logits bitwise identical: %v; max |alone-mixed| %.3g (tolerance %.3g); prompts of %d-%d tokens joining at steps 0,1,3,7",
		same, len(ps), c.steps, bitwise, worst, c.tol, len(ps[0]), len(ps[len(ps)-1]))
	if len(parts) > 0 {
		detail += "; " + strings.Join(parts, "; ")
	}
	r.add(check{Model: m.name, Name: "ragged batch = alone", Required: true, OK: ok, Detail: detail})
	return nil
}

// throughput times prompt and decode at each batch size on dev and returns
// every decode step's greedy picks (as text, to compare runs).
func throughput(c config, r *report, dev *cuda.Device, m model) (string, error) {
	hp := m.m.HP
	var sizes []int
	for _, f := range strings.Split(c.batches, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err == nil && n > 0 {
			sizes = append(sizes, n)
		}
	}
	maxSeqs := 0
	for _, n := range sizes {
		maxSeqs = max(maxSeqs, n)
	}
	const decodeSteps = 32
	ctxLen := c.promptN + decodeSteps + 1
	per := (ctxLen + blockSize - 1) / blockSize
	gpu, err := cuda.NewBackend(dev, m.m, cuda.KVConfig{BlockSize: blockSize, NumBlocks: maxSeqs * per, MaxBatchTokens: min(maxSeqs*c.promptN, 16384), MaxSeqs: maxSeqs})
	if err != nil {
		return "", err
	}
	defer gpu.Close()
	var picks strings.Builder
	weights := float64(cuda.WeightBytes(m.m)) - float64(len(m.m.TokEmbd.Data))
	kvPerTok := float64(batch.KVBytesPerBlock(hp.Layers, hp.KVHeads*hp.HeadDim, 1, 2))
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range sizes {
		seqs := make([]batch.SeqStep, n)
		for i := range seqs {
			toks := make([]int32, c.promptN)
			for j := range toks {
				toks[j] = int32(3 + rng.IntN(hp.VocabSize-3))
			}
			blocks := make([]int32, per)
			for j := range blocks {
				blocks[j] = int32(i*per + j)
			}
			seqs[i] = batch.SeqStep{Seq: uint64(i), Tokens: toks, Blocks: blocks}
		}
		// Prompt: all sequences' prompts, in chunks of at most 16384 tokens.
		// An untimed pass first: cuBLAS chooses and loads its kernels for
		// each new shape on first use.
		chunk := max(1, 16384/c.promptN)
		prompt := func() error {
			for lo := 0; lo < n; lo += chunk {
				if err := gpu.Forward(ctx, seqs[lo:min(n, lo+chunk)], make([][]float32, min(n, lo+chunk)-lo)); err != nil {
					return err
				}
			}
			return nil
		}
		if err := prompt(); err != nil {
			return "", err
		}
		if _, err := gpu.ForwardGreedy(ctx, []batch.SeqStep{{Tokens: seqs[0].Tokens[:1], Blocks: seqs[0].Blocks, Logits: true}}); err != nil {
			return "", err // syncs the untimed pass
		}
		t0 := time.Now()
		if err := prompt(); err != nil {
			return "", err
		}
		// Forward returns without syncing when no logits are wanted; one
		// greedy step below syncs. Count the prompt time up to its end.
		for i := range seqs {
			seqs[i].Tokens = seqs[i].Tokens[:1]
			seqs[i].Pos = c.promptN
		}
		promptDur := time.Since(t0)
		// Decode: greedy on the device; untimed warm-up step first.
		dec := make([]batch.SeqStep, n)
		copy(dec, seqs)
		for i := range dec {
			dec[i].Logits = true
		}
		if _, err := gpu.ForwardGreedy(ctx, dec); err != nil {
			return "", err
		}
		promptDur = time.Since(t0) // includes one decode step; negligible next to the prompt
		t1 := time.Now()
		for s := 1; s < decodeSteps; s++ {
			for i := range dec {
				dec[i].Pos = c.promptN + s
			}
			res, err := gpu.ForwardGreedy(ctx, dec)
			if err != nil {
				return "", err
			}
			fmt.Fprintln(&picks, res)
		}
		step := time.Since(t1).Seconds() / float64(decodeSteps-1)
		bytes := weights + float64(n)*float64(c.promptN+decodeSteps/2)*kvPerTok
		bound := bytes / c.bw
		p := perf{Model: m.name, Graphs: gpu.Graphs().Off == "", Seqs: n,
			PromptTokPerS: float64(n*c.promptN) / promptDur.Seconds(), DecodeTokPerS: float64(n) / step,
			DecodeStepMS: step * 1e3, BoundStepMS: bound * 1e3, FractionOfBound: bound / step, BytesPerDecodeStp: bytes}
		r.Perf = append(r.Perf, p)
		fmt.Fprintf(os.Stderr, "%s: %d seqs: prompt %.0f tok/s, decode %.0f tok/s (%.3f ms/step, bound %.3f ms, %.2f of bound); graphs %+v\n",
			m.name, n, p.PromptTokPerS, p.DecodeTokPerS, p.DecodeStepMS, p.BoundStepMS, p.FractionOfBound, gpu.Graphs())
	}
	return picks.String(), nil
}

// sortedOps orders a profile's operations by time, longest first.
func sortedOps(ms map[string]float64) []string {
	var ops []string
	for op := range ms {
		ops = append(ops, op)
	}
	slices.SortFunc(ops, func(a, b string) int { return cmp.Compare(ms[b], ms[a]) })
	return ops
}

// profileSteps times one step operation by operation for a few shapes:
// decode at 1 and 64 sequences with 128 tokens of context, a 128-token
// prompt, and 32 such prompts together.
func profileSteps(r *report, dev *cuda.Device, m model) error {
	hp := m.m.HP
	per := (256 + blockSize - 1) / blockSize
	gpu, err := cuda.NewBackend(dev, m.m, cuda.KVConfig{BlockSize: blockSize, NumBlocks: 64 * per, MaxBatchTokens: 4096, MaxSeqs: 64})
	if err != nil {
		return err
	}
	defer gpu.Close()
	mk := func(n, toks, pos int) []batch.SeqStep {
		seqs := make([]batch.SeqStep, n)
		for i := range seqs {
			t := make([]int32, toks)
			for j := range t {
				t[j] = int32(3 + (i*131+j*17)%(hp.VocabSize-3))
			}
			blocks := make([]int32, per)
			for j := range blocks {
				blocks[j] = int32(i*per + j)
			}
			seqs[i] = batch.SeqStep{Seq: uint64(i), Tokens: t, Pos: pos, Blocks: blocks, Logits: true}
		}
		return seqs
	}
	for _, st := range []struct {
		name         string
		n, toks, pos int
	}{{"prompt 32x128", 32, 128, 0}, {"prompt 1x128", 1, 128, 0}, {"decode 1 seq at 128", 1, 1, 128}, {"decode 64 seqs at 128", 64, 1, 128}} {
		seqs := mk(st.n, st.toks, st.pos)
		if _, err := gpu.Profile(context.Background(), seqs); err != nil { // warm-up: cuBLAS picks kernels
			return err
		}
		d, err := gpu.Profile(context.Background(), seqs)
		if err != nil {
			return err
		}
		p := profile{Model: m.name, Step: st.name, MS: map[string]float64{}}
		for op, v := range d {
			p.MS[op] = float64(v.Microseconds()) / 1e3
		}
		r.Profiles = append(r.Profiles, p)
		fmt.Fprintf(os.Stderr, "%s: profile %s:", m.name, st.name)
		for _, op := range sortedOps(p.MS) {
			fmt.Fprintf(os.Stderr, " %s %.3f;", op, p.MS[op])
		}
		fmt.Fprintln(os.Stderr)
	}
	return nil
}
