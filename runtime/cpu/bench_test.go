package cpu

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/llama"
)

// vocabKVs reads the tokenizer keys of a vocab-only GGUF.
func vocabKVs(tb testing.TB, rel string) []gguf.KV {
	f, err := gguf.Open(shareddata.Path(tb, rel))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var kvs []gguf.KV
	for _, kv := range f.KVs {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			if s, ok := kv.Value.([]string); ok {
				kv.Value = append([]string(nil), s...)
			}
			kvs = append(kvs, kv)
		}
	}
	return kvs
}

// cpuTime is the CPU time this process has used (all threads). Tokens per
// CPU-second (cpuTokens/s) measure the work per token, less disturbed by a
// busy machine than wall time; with GOMAXPROCS=1 they are the single-core
// rate.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkForward measures the CPU backend on the synth-110m shape (the
// llama.cpp reference of docs/reference-numbers.md), generated at start:
// prompt throughput (one 128-token chunk per step), and decode throughput
// with 1, 4, 16 and 64 sequences in one batch (aggregate tokens/s, each
// sequence with 64 tokens of context).
func BenchmarkForward(b *testing.B) {
	dir := b.TempDir()
	parent := b
	var toks []gguf.KV
	models := map[gguf.Type]*llama.Model{}
	// model generates the synth-110m model of type typ on first use, so a
	// -bench filter only pays for the types it selects.
	model := func(b *testing.B, typ gguf.Type) *llama.Model {
		if m, ok := models[typ]; ok {
			return m
		}
		if toks == nil {
			toks = vocabKVs(b, "vocab/ggml-vocab-llama-spm.gguf")
		}
		cfg, err := llama.Preset("synth-110m")
		if err != nil {
			b.Fatal(err)
		}
		cfg.Type, cfg.Tokenizer, cfg.VocabSize = typ, toks, 0
		path := filepath.Join(dir, "synth-110m-"+typ.String()+".gguf")
		out, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriter(out)
		if err := llama.Generate(cfg, w); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		out.Close()
		f, err := gguf.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		parent.Cleanup(func() { f.Close() }) // the model outlives this sub-benchmark
		m, err := llama.FromGGUF(f)
		if err != nil {
			b.Fatal(err)
		}
		models[typ] = m
		return m
	}
	for _, typ := range []gguf.Type{gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_K} {
		b.Run(typ.String()+"/prompt128", func(b *testing.B) {
			m := model(b, typ)
			be, err := New(m, Config{BlockSize: 16, NumBlocks: 8})
			if err != nil {
				b.Fatal(err)
			}
			prompt := make([]int32, 128)
			for i := range prompt {
				prompt[i] = int32(100 + i)
			}
			st := []batch.SeqStep{{Tokens: prompt, Blocks: []int32{0, 1, 2, 3, 4, 5, 6, 7}}}
			lg := [][]float32{make([]float32, m.HP.VocabSize)}
			c0 := cpuTime()
			b.ResetTimer()
			for range b.N {
				if err := be.Forward(context.Background(), st, lg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(128*b.N)/b.Elapsed().Seconds(), "tokens/s")
			b.ReportMetric(float64(128*b.N)/(cpuTime()-c0).Seconds(), "cpuTokens/s")
		})
		for _, nSeq := range []int{1, 4, 16, 64} {
			b.Run(fmt.Sprintf("%s/decode%d", typ, nSeq), func(b *testing.B) {
				m := model(b, typ)
				const ctxLen, bs = 64, 16
				perSeq := (ctxLen + 64) / bs
				be, err := New(m, Config{BlockSize: bs, NumBlocks: nSeq * perSeq})
				if err != nil {
					b.Fatal(err)
				}
				seqs := make([]batch.SeqStep, nSeq)
				lg := make([][]float32, nSeq)
				prompt := make([]int32, ctxLen)
				for i := range prompt {
					prompt[i] = int32(200 + i)
				}
				for i := range seqs {
					for j := range perSeq {
						seqs[i].Blocks = append(seqs[i].Blocks, int32(i*perSeq+j))
					}
					seqs[i].Tokens = prompt
					lg[i] = make([]float32, m.HP.VocabSize)
				}
				// Prefill the context of every sequence (not timed).
				if err := be.Forward(context.Background(), seqs, lg); err != nil {
					b.Fatal(err)
				}
				for i := range seqs {
					seqs[i].Pos = ctxLen
					seqs[i].Tokens = []int32{int32(300 + i)}
				}
				c0 := cpuTime()
				b.ResetTimer()
				for k := range b.N {
					for i := range seqs {
						seqs[i].Pos = ctxLen + k%64
					}
					if err := be.Forward(context.Background(), seqs, lg); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(nSeq*b.N)/b.Elapsed().Seconds(), "tokens/s")
				b.ReportMetric(float64(nSeq*b.N)/(cpuTime()-c0).Seconds(), "cpuTokens/s")
			})
		}
	}
}
