package cpu

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/llama"
	"github.com/weft-inference/weft/runtime/sample"
)

type goldenFile struct {
	Results []struct {
		Prompt            string       `json:"prompt"`
		PromptTokenIDs    []int32      `json:"prompt_token_ids"`
		GeneratedTokenIDs []int32      `json:"generated_token_ids"`
		FirstStepLogits   []float32    `json:"first_step_logits"`
		Steps             []goldenStep `json:"steps"`
	} `json:"results"`
}

type goldenStep struct {
	Pos int          `json:"pos"`
	ID  int32        `json:"id"`
	Top [][2]float64 `json:"top"`
}

func readGolden(t testing.TB, rel string) goldenFile {
	t.Helper()
	data, err := os.ReadFile(shareddata.Path(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	if len(g.Results) == 0 {
		t.Fatalf("%s: no results", rel)
	}
	return g
}

func loadModel(t testing.TB, rel string) *llama.Model {
	t.Helper()
	f, err := gguf.Open(shareddata.Path(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := llama.FromGGUF(f)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return m
}

// seqRunner drives one sequence through a backend with a private block table.
type seqRunner struct {
	blocks []int32
	pos    int
}

func newSeqRunner(firstBlock, nBlocks int) *seqRunner {
	r := &seqRunner{}
	for i := range nBlocks {
		r.blocks = append(r.blocks, int32(firstBlock+i))
	}
	return r
}

// greedy runs prompt in one step, then one token per step, and returns the
// generated tokens and the logits of every step. With forced non-nil, the
// fed tokens are forced (teacher forcing) instead of the argmax. On a pool
// laid out in layer groups (Config.SlidingKV) the sequence has one block
// table per group, taken from the pool's free blocks, and each window
// group gives back the rows that slid out of its window after every step.
func greedy(t testing.TB, b *Backend, prompt []int32, n int, forced []int32) ([]int32, [][]float32) {
	t.Helper()
	V := b.m.HP.VocabSize
	bs := b.cfg.BlockSize
	r := newSeqRunner(0, (len(prompt)+n+bs)/bs+1)
	windows := b.KV().Windows
	var sl *slidingSeq
	free := &blockList{}
	if windows != nil {
		sl = &slidingSeq{tables: make([][]int32, len(windows))}
		for blk := b.cfg.NumBlocks - 1; blk >= 0; blk-- {
			free.free = append(free.free, int32(blk))
		}
	}
	toks := prompt
	var out []int32
	var all [][]float32
	for step := range n {
		lg := make([]float32, V)
		st := batch.SeqStep{Seq: 1, Tokens: toks, Pos: r.pos, Blocks: r.blocks}
		if sl != nil {
			sl.pos = r.pos
			st.Blocks, st.Tables = nil, sl.grow(t, free, bs, len(toks))
		}
		if err := b.Forward(context.Background(), []batch.SeqStep{st}, [][]float32{lg}); err != nil {
			t.Fatal(err)
		}
		r.pos += len(toks)
		if sl != nil {
			sl.pos = r.pos
			sl.slide(free, windows, bs)
		}
		next := sample.Argmax(lg)
		out = append(out, next)
		all = append(all, lg)
		if forced != nil {
			next = forced[step]
		}
		toks = []int32{next}
	}
	return out, all
}

// forEachKernelSet runs f once per kernel set this CPU runs
// (kernels.AvailableISAs), as a subtest named by the set with that set in
// use, and restores the set in use before. The golden tests run their whole
// case lists with every set: the vector sets (avx2, avx512, avx512vnni)
// add little time; "go" (what a CGO_ENABLED=0 build runs) takes most of
// it, above all under -race, and "c" is next, and both stay whole because
// they are the portable paths. Select one set with -run, e.g.
// -run 'Golden/avx2'.
func forEachKernelSet(t *testing.T, f func(t *testing.T, isa string)) {
	t.Helper()
	for _, isa := range kernels.AvailableISAs() {
		t.Run(isa, func(t *testing.T) {
			prev, err := kernels.UseISA(isa)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if _, err := kernels.UseISA(prev); err != nil {
					t.Fatal(err)
				}
			}()
			f(t, isa)
		})
	}
}

func relL2(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(num / den)
}

func maxAbs(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

func TestStories260KGolden(t *testing.T) {
	// F16 weights: like llama.cpp we round the activations to F16 before
	// each F16 matmul; float32 summation-order differences (~1e-7) flip an
	// occasional F16 rounding, which leaves ~2e-4 relative L2 on the logits,
	// so those cases get 5e-4. The F16 model has no kvf32 golden of its own;
	// llama.cpp gives it the F32 model's tokens, which we check.
	cases := []struct {
		model, golden, kv string
		tol               float64
	}{
		{"models/stories260K.gguf", "golden/stories260K-F32.greedy64.kvf32.json", "f32", 1e-4},
		{"models/stories260K.gguf", "golden/stories260K-F32.greedy64.kvf16.json", "f16", 1e-4},
		{"models/stories260K-F16.gguf", "golden/stories260K-F16.greedy64.kvf16.json", "f16", 5e-4},
		{"models/stories260K-F16.gguf", "golden/stories260K-F32.greedy64.kvf32.json", "f32", 5e-4},
	}
	forEachKernelSet(t, func(t *testing.T, _ string) {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/kv%s", c.model, c.kv), func(t *testing.T) {
				checkGoldenExact(t, c.model, c.golden, c.kv, c.tol)
			})
		}
	})
}

// checkGoldenExact runs every prompt of a golden file greedily and requires
// every generated token to equal llama.cpp's and the first-step logits to
// be within tol (relative L2).
func checkGoldenExact(t *testing.T, model, golden, kv string, tol float64) {
	t.Helper()
	m := loadModel(t, model)
	g := readGolden(t, golden)
	b, err := New(m, Config{KVType: kv, BlockSize: 16, NumBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range g.Results {
		got, logits := greedy(t, b, res.PromptTokenIDs, len(res.GeneratedTokenIDs), nil)
		for i := range got {
			if got[i] != res.GeneratedTokenIDs[i] {
				t.Fatalf("%q: token %d = %d, golden %d (got %v)", res.Prompt, i, got[i], res.GeneratedTokenIDs[i], got)
			}
		}
		if e := relL2(logits[0], res.FirstStepLogits); e > tol {
			t.Errorf("%q: first-step logits relative L2 error %.3g > %g", res.Prompt, e, tol)
		} else {
			t.Logf("%q: %d/%d tokens identical, first-step logits relative L2 error %.3g, max abs %.3g",
				res.Prompt, len(got), len(got), e, maxAbs(logits[0], res.FirstStepLogits))
		}
	}
}

// TestStories260KQuantGolden compares the Q8_0 and Q4_0 models, run with
// kernels.MatMul as it is, with llama.cpp. llama.cpp quantizes the
// activations to Q8_0 before these matmuls; an engine that does not copy
// that rounding exactly differs by a few tenths: first-step logits must be
// within tol = 0.3 (max abs), and greedy tokens must match llama.cpp until
// the first step where llama.cpp's own top-1/top-2 gap is below tol (after
// that either token is a legitimate outcome).
//
// Measured: float activations (CGO_ENABLED=0) 0.11-0.18; with llama.cpp's
// exact activation scheme (TestStories260KQuantExactActivations) 2e-6.
func TestStories260KQuantGolden(t *testing.T) {
	cases := []struct {
		model, golden, kv string
		tol               float64
	}{
		{"models/stories260K-Q8_0.gguf", "golden/stories260K-Q8_0.greedy64.kvf32.json", "f32", 0.3},
		{"models/stories260K-Q8_0.gguf", "golden/stories260K-Q8_0.greedy64.kvf16.json", "f16", 0.3},
		{"models/stories260K-Q4_0.gguf", "golden/stories260K-Q4_0.greedy64.kvf16.json", "f16", 0.3},
	}
	forEachKernelSet(t, func(t *testing.T, _ string) {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/kv%s", c.model, c.kv), func(t *testing.T) {
				checkGoldenQuant(t, c.model, c.golden, c.kv, c.tol)
			})
		}
	})
}

// checkGoldenQuant runs every prompt of a golden file greedily: first-step
// logits within tol (max abs), and llama.cpp's tokens until the first step
// where llama.cpp's own top-1/top-2 gap is below tol.
func checkGoldenQuant(t *testing.T, model, golden, kv string, tol float64) {
	t.Helper()
	m := loadModel(t, model)
	g := readGolden(t, golden)
	b, err := New(m, Config{KVType: kv, BlockSize: 16, NumBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range g.Results {
		got, logits := greedy(t, b, res.PromptTokenIDs, len(res.GeneratedTokenIDs), nil)
		d := maxAbs(logits[0], res.FirstStepLogits)
		if d > tol {
			t.Errorf("%q: first-step logits max abs difference %.3g > %g", res.Prompt, d, tol)
		}
		same := 0
		for i, st := range res.Steps {
			if len(st.Top) >= 2 && st.Top[0][1]-st.Top[1][1] < tol {
				break
			}
			if got[i] != res.GeneratedTokenIDs[i] {
				t.Fatalf("%q: token %d = %d, golden %d, golden top-2 gap %.3g", res.Prompt, i, got[i], res.GeneratedTokenIDs[i], st.Top[0][1]-st.Top[1][1])
			}
			same++
		}
		t.Logf("%q: first-step max abs %.3g; %d tokens compared (until golden gap < %g)", res.Prompt, d, same, tol)
	}
}
