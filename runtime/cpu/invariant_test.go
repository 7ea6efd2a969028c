package cpu

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/kernels"
)

// invTarget is the sequence whose logits the batch-invariance tests follow:
// a 70-token prompt (so chunks of 1, 7 and 64 all differ from the whole),
// then invDecode teacher-forced decode steps.
const (
	invPromptLen = 70
	invDecode    = 4
)

// invConfig places the target in a batch: others sequences run beside it
// (other i: a prompt of 2+(13i)%37 tokens fed whole, starting at step i%3,
// then 3 decode steps), the target's prompt is fed in chunks of chunk
// tokens (0: whole), and the target sits at index pos of every step's
// batch (posFirst, posMiddle or posLast).
type invConfig struct {
	others, chunk int
	pos           string
}

const (
	posFirst  = "first"
	posMiddle = "middle"
	posLast   = "last"
)

// invConfigs cross every value of the three axes at least once, with
// steps of 1 to about 450 tokens: the first step of 12 and 20 others
// passes every kernel threshold (16, 24, 48, 96, 160 tokens), their
// decode steps sit between 16 and 24, and 3 or 5 others stay below 16.
var invConfigs = []invConfig{
	{0, 1, posFirst},
	{1, 7, posLast},
	{3, 64, posFirst},
	{5, 0, posMiddle},
	{12, 7, posMiddle},
	{20, 0, posLast},
	{20, 64, posMiddle},
}

func invTokens(seed, n int) []int32 {
	toks := make([]int32, n)
	for j := range toks {
		toks[j] = int32(3 + (seed*37+j*11)%500)
	}
	return toks
}

// invAlone runs the target alone: the prompt in one step at blocks 0..,
// then the decode steps. It returns the logits of the last prompt token
// and of every decode step.
func invAlone(t *testing.T, b *Backend) [][]float32 {
	t.Helper()
	prompt, forced := invTokens(0, invPromptLen), invTokens(1, invDecode)
	r := newSeqRunner(0, (invPromptLen+invDecode+b.cfg.BlockSize-1)/b.cfg.BlockSize)
	var out [][]float32
	toks := prompt
	for i := 0; i <= invDecode; i++ {
		lg := make([]float32, b.m.HP.VocabSize)
		st := batch.SeqStep{Seq: 0, Tokens: toks, Pos: r.pos, Blocks: r.blocks}
		if err := b.Forward(context.Background(), []batch.SeqStep{st}, [][]float32{lg}); err != nil {
			t.Fatal(err)
		}
		r.pos += len(toks)
		out = append(out, lg)
		if i < invDecode {
			toks = forced[i : i+1]
		}
	}
	return out
}

// invBatched runs the target inside the batch cfg describes and returns
// its logits as invAlone does. Every sequence's block table interleaves
// with the others', in reverse order, away from the blocks invAlone uses.
func invBatched(t *testing.T, b *Backend, cfg invConfig) [][]float32 {
	t.Helper()
	type seq struct {
		prompt, forced []int32
		start          int
		fed, pos, dec  int
		blocks         []int32
	}
	n := cfg.others + 1
	seqs := make([]*seq, n) // seqs[0] is the target
	for i := range seqs {
		s := &seq{}
		if i == 0 {
			s.prompt, s.forced = invTokens(0, invPromptLen), invTokens(1, invDecode)
		} else {
			s.prompt, s.forced = invTokens(100+i, 2+(13*i)%37), invTokens(200+i, 3)
			s.start = i % 3
		}
		nb := (len(s.prompt) + len(s.forced) + b.cfg.BlockSize - 1) / b.cfg.BlockSize
		for j := range nb {
			s.blocks = append(s.blocks, int32(b.cfg.NumBlocks-1-(j*n+i)))
		}
		seqs[i] = s
	}
	var got [][]float32
	for step := 0; ; step++ {
		var steps []batch.SeqStep
		var logits [][]float32
		var idx []int
		for i, s := range seqs {
			if step < s.start || s.dec == len(s.forced)+1 {
				continue
			}
			st := batch.SeqStep{Seq: uint64(i), Pos: s.pos, Blocks: s.blocks}
			var lg []float32
			switch {
			case s.fed < len(s.prompt):
				c := len(s.prompt) - s.fed
				if i == 0 && cfg.chunk > 0 {
					c = min(c, cfg.chunk)
				}
				st.Tokens = s.prompt[s.fed : s.fed+c]
				s.fed += c
				if s.fed == len(s.prompt) {
					lg = make([]float32, b.m.HP.VocabSize)
				}
			default:
				st.Tokens = s.forced[s.dec-1 : s.dec]
				lg = make([]float32, b.m.HP.VocabSize)
			}
			steps = append(steps, st)
			logits = append(logits, lg)
			idx = append(idx, i)
		}
		if len(steps) == 0 {
			break
		}
		// Move the target (index 0 when it runs) to its place.
		if idx[0] == 0 && len(steps) > 1 {
			to := 0
			switch cfg.pos {
			case posMiddle:
				to = len(steps) / 2
			case posLast:
				to = len(steps) - 1
			}
			steps[0], steps[to] = steps[to], steps[0]
			logits[0], logits[to] = logits[to], logits[0]
			idx[0], idx[to] = idx[to], idx[0]
		}
		if err := b.Forward(context.Background(), steps, logits); err != nil {
			t.Fatal(err)
		}
		for k, i := range idx {
			s := seqs[i]
			s.pos += len(steps[k].Tokens)
			if logits[k] != nil {
				s.dec++
				if i == 0 {
					got = append(got, logits[k])
				}
			}
		}
	}
	return got
}

// invFirstDiff compares the target's logits of two runs bit for bit and
// describes the first difference ("" when there is none).
func invFirstDiff(got, want [][]float32) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d logits vectors, alone %d", len(got), len(want))
	}
	for s := range want {
		for i := range want[s] {
			if math.Float32bits(got[s][i]) != math.Float32bits(want[s][i]) {
				return fmt.Sprintf("step %d token %d: logit %v (bits %08x), alone %v (bits %08x)",
					s, i, got[s][i], math.Float32bits(got[s][i]), want[s][i], math.Float32bits(want[s][i]))
			}
		}
	}
	return ""
}

var invTypes = []string{"F32", "F16", "Q8_0", "Q4_K_M", "Q6_K", "Q4_0"}

// invCut reports whether the test leaves out KV type kv (index kvi) of
// weight type typ (index ti) on kernel set isa, to keep the matrix to a few
// seconds, and which configs it runs. The best kernel set (the one the
// server takes) and every AVX set run all of it. Where they are not the
// best: "c" runs every weight type with one KV type, alternating; "go",
// whose products take one kernel for every token count (only attention's
// path depends on the batch), runs F16 with both KV types and the configs
// of up to 12 others.
func invCut(isa string, ti, kvi int) (skip bool, cfgs []invConfig) {
	isas := kernels.AvailableISAs()
	if isa == isas[len(isas)-1] {
		return false, invConfigs
	}
	switch isa {
	case "c":
		return ti%2 != kvi, invConfigs
	case "go":
		for _, c := range invConfigs {
			if c.others <= 12 {
				cfgs = append(cfgs, c)
			}
		}
		return invTypes[ti] != "F16", cfgs
	}
	return false, invConfigs
}

// TestBatchInvariantLogits: with kernels.SetBatchInvariant, the target's
// logits are the same bits alone as inside every batch of invConfigs (other
// sequences with other prompt lengths, its prompt chunked, at any place in
// the batch), for every synth-256 type of invTypes, each kernel set this
// CPU runs and both KV types (invCut names what the slow kernel sets
// leave out). The whole matrix takes about 16 s on two Zen 4 cores.
func TestBatchInvariantLogits(t *testing.T) {
	defer kernels.SetBatchInvariant(kernels.SetBatchInvariant(true))
	for ti, typ := range invTypes {
		m := loadModel(t, "synth/models/synth-256-"+typ+".gguf")
		for kvi, kv := range []string{"f32", "f16"} {
			b, err := New(m, Config{KVType: kv, BlockSize: 16, NumBlocks: 128})
			if err != nil {
				t.Fatal(err)
			}
			for _, isa := range kernels.AvailableISAs() {
				skip, cfgs := invCut(isa, ti, kvi)
				if skip {
					continue
				}
				t.Run(fmt.Sprintf("%s/kv%s/%s", typ, kv, isa), func(t *testing.T) {
					prev, err := kernels.UseISA(isa)
					if err != nil {
						t.Fatal(err)
					}
					defer kernels.UseISA(prev)
					want := invAlone(t, b)
					for _, cfg := range cfgs {
						if d := invFirstDiff(invBatched(t, b, cfg), want); d != "" {
							t.Errorf("%d others, chunk %d, target %s: %s", cfg.others, cfg.chunk, cfg.pos, d)
						}
					}
				})
			}
		}
	}
}

// TestBatchVariantLogitsDiffer: without SetBatchInvariant the same runs
// give the target other bits in some batch (the packed GEMMs and the
// attention products of long chunks sum in another order), so
// TestBatchInvariantLogits compares runs that can differ.
func TestBatchVariantLogitsDiffer(t *testing.T) {
	defer kernels.SetBatchInvariant(kernels.SetBatchInvariant(false))
	for _, typ := range []string{"F32", "F16", "Q8_0"} {
		t.Run(typ, func(t *testing.T) {
			m := loadModel(t, "synth/models/synth-256-"+typ+".gguf")
			b, err := New(m, Config{KVType: "f16", BlockSize: 16, NumBlocks: 128})
			if err != nil {
				t.Fatal(err)
			}
			want := invAlone(t, b)
			differ := 0
			for _, cfg := range invConfigs {
				if d := invFirstDiff(invBatched(t, b, cfg), want); d != "" {
					differ++
				}
			}
			if differ == 0 {
				t.Errorf("kernel set %s: every batch of invConfigs gave the target its bits alone without SetBatchInvariant; TestBatchInvariantLogits would prove nothing", kernels.ISA())
			}
			t.Logf("kernel set %s: %d of %d batches differ from the target alone", kernels.ISA(), differ, len(invConfigs))
		})
	}
}
