package scheduler

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/cpu"
)

// BenchmarkBatching runs the seed workload (16-token prompts, answers
// cycling 6, 50 and 300 tokens, 8 closed-loop clients, batch capacity 8) on
// the built-in model with the CPU backend, in both batching modes, and
// reports output tokens/s and the padding rows static mode computed:
//
//	go test -run '^$' -bench Batching -benchtime 1x ./scheduler/
func BenchmarkBatching(b *testing.B) {
	m, err := runtime.LoadDefault()
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	for _, batching := range []string{BatchingContinuous, BatchingStatic} {
		b.Run(batching, func(b *testing.B) {
			for range b.N {
				tps, st := runSeedWorkload(b, m, batching, 8, 24)
				b.ReportMetric(tps, "out-tok/s")
				b.ReportMetric(float64(st.PaddingTokens), "pad-tok")
				b.ReportMetric(float64(st.Steps), "steps")
			}
		})
	}
}

func runSeedWorkload(b *testing.B, m *runtime.Model, batching string, capacity, requests int) (float64, Stats) {
	be, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, NumBlocks: 512})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	kv := be.KV()
	s, err := New(Config{BlockSize: kv.BlockSize, NumBlocks: kv.NumBlocks, MaxSeqs: capacity,
		Batching: batching, BatchSize: capacity, ContextLen: m.HP.ContextLen}, runtime.NewEngine(be, m.HP.VocabSize))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	lens := []int{6, 50, 300}
	var next, out int
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range capacity {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= requests {
					return
				}
				p := make([]int32, 16)
				for j := range p {
					p[j] = int32(3 + (i*31+j*7)%500)
				}
				st, err := s.Submit(ctx, Request{Prompt: p, MaxTokens: lens[i%len(lens)], IgnoreEOS: true})
				if err != nil {
					b.Error(err)
					return
				}
				for {
					ev, err := st.Recv(ctx)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					out += len(ev.Tokens)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	return float64(out) / el.Seconds(), s.Stats()
}
