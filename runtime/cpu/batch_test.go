package cpu

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// TestRaggedBatchMatchesSolo runs 16 sequences with different prompt
// lengths together, one Forward per step, with prompts fed in chunks of
// varying size alongside other sequences' decode steps and interleaved
// (non-contiguous) block tables, and checks every sequence generates the
// same tokens as when it runs alone.
func TestRaggedBatchMatchesSolo(t *testing.T) {
	for _, kv := range []string{"f32", "f16"} {
		t.Run(kv, func(t *testing.T) {
			m := loadModel(t, "models/stories260K.gguf")
			const nSeq, nGen, bs = 16, 12, 8
			b, err := New(m, Config{KVType: kv, BlockSize: bs, NumBlocks: nSeq * 16})
			if err != nil {
				t.Fatal(err)
			}
			prompts := make([][]int32, nSeq)
			for i := range prompts {
				p := []int32{1}
				for j := range 2 + 5*i {
					p = append(p, int32(3+(i*37+j*11)%500))
				}
				prompts[i] = p
			}
			want := make([][]int32, nSeq)
			for i, p := range prompts {
				want[i], _ = greedy(t, b, p, nGen, nil)
			}

			type state struct {
				blocks []int32
				fed    int // prompt tokens fed so far
				pos    int
				next   int32
				out    []int32
			}
			st := make([]*state, nSeq)
			for i := range st {
				s := &state{}
				for j := range 16 {
					s.blocks = append(s.blocks, int32(j*nSeq+(nSeq-1-i)))
				}
				st[i] = s
			}
			V := m.HP.VocabSize
			for step := 0; ; step++ {
				var seqs []batch.SeqStep
				var logits [][]float32
				var idx []int
				for i, s := range st {
					if len(s.out) == nGen {
						continue
					}
					// sequence i starts at step i/2 so prompts and decodes mix
					if step < i/2 {
						continue
					}
					ss := batch.SeqStep{Seq: uint64(i), Pos: s.pos, Blocks: s.blocks}
					var lg []float32
					if s.fed < len(prompts[i]) {
						n := min(1+(step+i)%7, len(prompts[i])-s.fed)
						ss.Tokens = prompts[i][s.fed : s.fed+n]
						s.fed += n
						if s.fed == len(prompts[i]) {
							lg = make([]float32, V)
						}
					} else {
						ss.Tokens = []int32{s.next}
						lg = make([]float32, V)
					}
					seqs = append(seqs, ss)
					logits = append(logits, lg)
					idx = append(idx, i)
				}
				if len(seqs) == 0 {
					break
				}
				if err := b.Forward(context.Background(), seqs, logits); err != nil {
					t.Fatal(err)
				}
				for k, i := range idx {
					s := st[i]
					s.pos += len(seqs[k].Tokens)
					if logits[k] != nil {
						s.next = sample.Argmax(logits[k])
						s.out = append(s.out, s.next)
					}
				}
			}
			for i := range st {
				if diff := cmp.Diff(want[i], st[i].out); diff != "" {
					t.Errorf("sequence %d (prompt %d tokens): batched differs from solo (-solo +batched):\n%s", i, len(prompts[i]), diff)
				}
			}
		})
	}
}

func TestForwardRejectsBadSteps(t *testing.T) {
	m := loadModel(t, "models/stories260K.gguf")
	b, err := New(m, Config{BlockSize: 4, NumBlocks: 4})
	if err != nil {
		t.Fatal(err)
	}
	V := m.HP.VocabSize
	tests := []struct {
		name string
		step batch.SeqStep
		lg   []float32
	}{
		{"no tokens", batch.SeqStep{Blocks: []int32{0}}, nil},
		{"blocks too short", batch.SeqStep{Tokens: []int32{1, 2, 3, 4, 5}, Blocks: []int32{0}}, nil},
		{"block out of range", batch.SeqStep{Tokens: []int32{1}, Blocks: []int32{4}}, nil},
		{"token out of range", batch.SeqStep{Tokens: []int32{int32(V)}, Blocks: []int32{0}}, nil},
		{"negative pos", batch.SeqStep{Tokens: []int32{1}, Pos: -1, Blocks: []int32{0}}, nil},
		{"short logits", batch.SeqStep{Tokens: []int32{1}, Blocks: []int32{0}}, make([]float32, V-1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := b.Forward(context.Background(), []batch.SeqStep{tc.step}, [][]float32{tc.lg})
			if err == nil {
				t.Fatal("Forward accepted an invalid step")
			}
		})
	}
}

// TestForwardSteadyStateAllocs checks that a decode step reuses its scratch:
// only a handful of small allocations, none proportional to the model or
// the batch.
func TestForwardSteadyStateAllocs(t *testing.T) {
	m := loadModel(t, "models/stories260K.gguf")
	b, err := New(m, Config{BlockSize: 16, NumBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]batch.SeqStep, 8)
	lg := make([][]float32, 8)
	for i := range seqs {
		seqs[i] = batch.SeqStep{Tokens: []int32{1, 2, 3, 4}, Blocks: []int32{int32(2 * i), int32(2*i + 1)}}
		lg[i] = make([]float32, m.HP.VocabSize)
	}
	if err := b.Forward(context.Background(), seqs, lg); err != nil {
		t.Fatal(err)
	}
	for i := range seqs {
		seqs[i].Tokens, seqs[i].Pos = []int32{5}, 4
	}
	allocs := testing.AllocsPerRun(20, func() {
		if err := b.Forward(context.Background(), seqs, lg); err != nil {
			t.Fatal(err)
		}
	})
	// A few small allocations per layer (goroutine closures here, scratch
	// in the pure-Go kernels of runtime/kernels); a per-token or per-row allocation would
	// show as hundreds.
	if limit := float64(16 * m.HP.Layers); allocs > limit {
		t.Errorf("%.0f allocations per decode step, want at most %.0f", allocs, limit)
	}
	t.Logf("%.0f allocations per decode step", allocs)
}
