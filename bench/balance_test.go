package bench_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/bench"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/tokenizer"
	"github.com/weft-inference/weft/scheduler"
	"github.com/weft-inference/weft/scheduler/schedtest"
	"github.com/weft-inference/weft/server"
)

// byteTokenizer: one token per byte (id = 3 + byte), BOS 1, EOS 2.
type byteTokenizer struct{}

func (byteTokenizer) Encode(text string, addSpecial, _ bool) []int32 {
	var ids []int32
	if addSpecial {
		ids = append(ids, 1)
	}
	for i := 0; i < len(text); i++ {
		ids = append(ids, 3+int32(text[i]))
	}
	return ids
}

// EncodeSegments has no control tokens to recognise: the segments' text.
func (byteTokenizer) EncodeSegments(segs []tokenizer.Segment, addSpecial bool) []int32 {
	var b strings.Builder
	for _, sg := range segs {
		b.WriteString(sg.Text)
	}
	return byteTokenizer{}.Encode(b.String(), addSpecial, false)
}

func (byteTokenizer) Decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		if id >= 3 {
			b.WriteByte(byte(id - 3))
		}
	}
	return b.String()
}

func (byteTokenizer) VocabSize() int { return 3 + 256 }

// stepModel is the paged fake paced to take stepTime per step whatever the
// batch (real time: the balancers see real load), sampling 'a' always.
func stepModel(blockSize, numBlocks int, stepTime time.Duration) *schedtest.Model {
	m := schedtest.NewModel(blockSize, numBlocks)
	m.Next = func([]int32) int32 { return schedtest.ByteOffset + 'a' }
	m.OnStep = func(int, []batch.SeqStep) { time.Sleep(stepTime) }
	return m
}

// replica serves a scheduler on stepModel behind a weft server on a
// loopback port until the test ends, and returns its address.
func replica(t *testing.T, maxSeqs int, stepTime time.Duration) string {
	t.Helper()
	sched, err := scheduler.New(scheduler.Config{
		BlockSize: 16, NumBlocks: 1024, MaxSeqs: maxSeqs, ContextLen: 512,
		NewDecoder: func() scheduler.TextDecoder { return schedtest.Bytes{} },
		IsEOG:      func(id int32) bool { return id == 2 },
		VocabSize:  3 + 256,
	}, stepModel(16, 1024, stepTime))
	if err != nil {
		t.Fatal(err)
	}
	door, err := frontdoor.New(frontdoor.Config{Tokenizer: byteTokenizer{}, Limits: sched.Limits(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{
		Scheduler: sched, Door: door, Tokenizer: byteTokenizer{},
		Info: server.ModelInfo{Name: "fake", BOS: 1, EOG: []int32{2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone, serveDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(runDone)
		sched.Run(ctx)
	}()
	go func() {
		defer close(serveDone)
		srv.Serve(lis)
	}()
	srv.SetServing(true)
	t.Cleanup(func() {
		srv.GRPC().Stop()
		<-serveDone
		cancel()
		<-runDone
	})
	return lis.Addr().String()
}

// TestWeightedRoundRobinAvoidsSlowReplica runs the same closed-loop load
// over three replicas, one of which batches a single sequence (an eighth of
// the others' capacity), with round_robin and with weighted_round_robin on
// the replicas' ORCA reports: the weighted policy must send the slow
// replica clearly fewer requests. Throughput and p99 TTFT are logged, not
// asserted (timing claims belong in benchmarks).
func TestWeightedRoundRobinAvoidsSlowReplica(t *testing.T) {
	const step = 2 * time.Millisecond
	fast1, fast2 := replica(t, 8, step), replica(t, 8, step)
	slow := replica(t, 1, step)
	targets := []string{fast1, fast2, slow}

	run := func(lb string) bench.Result {
		t.Helper()
		conn, err := bench.DialTargets(targets, lb, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// The warm-up (about half a second) covers the weights' blackout
		// period and the first reports, so the measured requests see
		// settled weights.
		res, err := bench.Run(ctx, inferencev1.NewInferenceServiceClient(conn), bench.Config{
			Concurrency: 12, Requests: 240, Warmup: 240, Seed: 1,
			PromptLen: bench.Fixed{N: 8}, OutputLen: bench.Fixed{N: 8}, IgnoreEOS: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		return res
	}
	share := func(r bench.Result) float64 {
		total := 0
		for _, s := range r.ByTarget {
			total += s.Requests
		}
		if total != r.Requests {
			t.Errorf("by_target counts %d requests, the run %d: %v", total, r.Requests, r.ByTarget)
		}
		return float64(r.ByTarget[slow].Requests) / float64(r.Requests)
	}
	rr := run(bench.RoundRobin)
	wrr := run(bench.WeightedRoundRobin)
	rrShare, wrrShare := share(rr), share(wrr)
	t.Logf("round_robin:          slow share %.3f, %.1f req/s, p99 TTFT %.1f ms, by target %v",
		rrShare, rr.RequestThroughput, rr.TTFT.P99, rr.ByTarget)
	t.Logf("weighted_round_robin: slow share %.3f, %.1f req/s, p99 TTFT %.1f ms, by target %v",
		wrrShare, wrr.RequestThroughput, wrr.TTFT.P99, wrr.ByTarget)
	if rrShare < 0.25 {
		t.Errorf("round_robin gave the slow replica %.3f of the requests, want about 1/3", rrShare)
	}
	if wrrShare >= 0.8*rrShare {
		t.Errorf("weighted_round_robin gave the slow replica %.3f of the requests, want < 0.8 × round_robin's %.3f", wrrShare, rrShare)
	}
}
