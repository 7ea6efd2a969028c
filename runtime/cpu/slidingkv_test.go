package cpu

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/weft-inference/weft/runtime/batch"
)

// slidingSeq is one sequence's block tables in a pool laid out in layer
// groups, kept as the scheduler keeps them: a row of blocks of every group
// per BlockSize positions, and the rows a window group no longer reads
// given back (to the front of the free list, so another sequence's next
// row reuses them at once) and marked -1.
type slidingSeq struct {
	tables [][]int32
	pos    int
}

type blockList struct{ free []int32 }

func (l *blockList) take(t testing.TB) int32 {
	if len(l.free) == 0 {
		t.Fatal("pool exhausted")
	}
	b := l.free[len(l.free)-1]
	l.free = l.free[:len(l.free)-1]
	return b
}

// grow makes s's tables cover n more positions and returns them.
func (s *slidingSeq) grow(t testing.TB, l *blockList, bs, n int) [][]int32 {
	for len(s.tables[0])*bs < s.pos+n {
		for g := range s.tables {
			s.tables[g] = append(s.tables[g], l.take(t))
		}
	}
	return s.tables
}

// slide gives back the rows no query after s.pos reads.
func (s *slidingSeq) slide(l *blockList, windows []int, bs int) {
	for g, w := range windows {
		for r := range batch.FirstRow(w, bs, s.pos) {
			if b := s.tables[g][r]; b >= 0 {
				l.free = append(l.free, b)
				s.tables[g][r] = -1
			}
		}
	}
}

// TestSlidingKVSameLogits runs the arch2 models with sliding windows
// (gemma3: five window layers and one global; gpt-oss: alternating) on a
// pool laid out in layer groups (Config.SlidingKV), two sequences at a
// time, prompts in chunks then greedy decoding, window rows given back and
// reused by the other sequence as soon as they slide out: every logit must
// be the same bits as with every layer keeping the whole context in one
// table. The grouped pool is smaller: a block holds a group's layers.
func TestSlidingKVSameLogits(t *testing.T) {
	for _, rel := range []string{"synth/arch2/models/synth-gemma3-256-F32.gguf", "synth/arch2/models/synth-gptoss-256-F32.gguf"} {
		for _, kvType := range []string{"f16", "f32", "q8_0"} {
			t.Run(rel+"/"+kvType, func(t *testing.T) {
				m := loadModel(t, rel)
				const bs, nb = 4, 64
				keep, err := New(m, Config{BlockSize: bs, NumBlocks: nb, KVType: kvType})
				if err != nil {
					t.Fatal(err)
				}
				slide, err := New(m, Config{BlockSize: bs, NumBlocks: nb, KVType: kvType, SlidingKV: true})
				if err != nil {
					t.Fatal(err)
				}
				windows := slide.KV().Windows
				lay := slide.layout
				if windows == nil || keep.KV().Windows != nil {
					t.Fatalf("windows: sliding %v, keeping %v", windows, keep.KV().Windows)
				}
				if got, want := slide.KV().BytesPerBlock*int64(m.HP.Layers/lay.Size), keep.KV().BytesPerBlock; got != want {
					t.Errorf("a block of %d layers is %d bytes: x%d = %d, a block of all is %d", lay.Size, slide.KV().BytesPerBlock, m.HP.Layers/lay.Size, got, want)
				}
				t.Logf("layout %s", lay)
				prompts := [][]int32{
					{1, 403, 407, 261, 378, 291, 376, 400, 428, 317, 391, 266, 267, 403, 407, 261, 378, 291, 376, 400},
					{1, 291, 376, 400, 428, 317, 391, 266, 267, 50, 60, 70, 80},
				}
				list := &blockList{}
				for b := nb - 1; b >= 0; b-- {
					list.free = append(list.free, int32(b))
				}
				seqs := make([]*slidingSeq, len(prompts))
				hist := make([][]int32, len(prompts))
				keepBlocks := make([][]int32, len(prompts))
				for i, p := range prompts {
					seqs[i] = &slidingSeq{tables: make([][]int32, len(windows))}
					hist[i] = slices.Clone(p)
					for r := range 20 {
						keepBlocks[i] = append(keepBlocks[i], int32(i*20+r))
					}
				}
				const chunk, decode = 7, 24
				V := m.HP.VocabSize
				for step := 0; ; step++ {
					var ks, ss []batch.SeqStep
					var kl, sl [][]float32
					for i, s := range seqs {
						if len(hist[i]) >= len(prompts[i])+decode {
							continue
						}
						n := min(chunk, len(hist[i])-s.pos)
						toks := hist[i][s.pos : s.pos+n]
						last := s.pos+n == len(hist[i])
						ks = append(ks, batch.SeqStep{Seq: uint64(i), Tokens: toks, Pos: s.pos, Blocks: keepBlocks[i], Logits: last})
						ss = append(ss, batch.SeqStep{Seq: uint64(i), Tokens: toks, Pos: s.pos, Tables: s.grow(t, list, bs, n), Logits: last})
						var a, b []float32
						if last {
							a, b = make([]float32, V), make([]float32, V)
						}
						kl, sl = append(kl, a), append(sl, b)
					}
					if len(ks) == 0 {
						break
					}
					if err := keep.Forward(context.Background(), ks, kl); err != nil {
						t.Fatal(err)
					}
					if err := slide.Forward(context.Background(), ss, sl); err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					for k, row := range ss {
						i := int(row.Seq)
						s := seqs[i]
						s.pos += len(row.Tokens)
						s.slide(list, windows, bs)
						if kl[k] == nil {
							continue
						}
						for j := range kl[k] {
							if math.Float32bits(kl[k][j]) != math.Float32bits(sl[k][j]) {
								t.Fatalf("step %d seq %d: logit %d is %g sliding, %g keeping every layer", step, i, j, sl[k][j], kl[k][j])
							}
						}
						hist[i] = append(hist[i], int32(argmax(kl[k])))
					}
				}
				// A window row below the window was given back, so the pool
				// holds fewer blocks than rows x groups.
				held := nb - len(list.free)
				rows := len(seqs[0].tables[0]) + len(seqs[1].tables[0])
				if held >= rows*len(windows) {
					t.Errorf("%d blocks held for %d rows of %d groups: nothing slid", held, rows, len(windows))
				}
				// A table that lacks a row inside a window is refused.
				s := seqs[0]
				bad := make([][]int32, len(s.tables))
				for g := range bad {
					bad[g] = slices.Clone(s.tables[g])
				}
				for g, w := range windows {
					if w > 0 {
						bad[g][batch.FirstRow(w, bs, s.pos-1)] = -1
						break
					}
				}
				err = slide.Forward(context.Background(), []batch.SeqStep{{Tokens: []int32{5}, Pos: s.pos - 1, Tables: bad}}, [][]float32{nil})
				if !errors.Is(err, ErrBadStep) {
					t.Errorf("a window row missing: Forward returned %v, want ErrBadStep", err)
				}
			})
		}
	}
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
