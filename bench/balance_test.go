package bench_test

import (
	"context"
	"log/slog"
	"net"
	"slices"
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
func replica(t testing.TB, maxSeqs int, stepTime time.Duration) string {
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

// slowShareRig is three replicas, one of which batches a single sequence
// (an eighth of the others' capacity), and a closed-loop run over them
// with a balancing policy.
type slowShareRig struct {
	targets []string
	slow    string
}

func newSlowShareRig(t testing.TB) *slowShareRig {
	const step = 2 * time.Millisecond
	fast1, fast2 := replica(t, 8, step), replica(t, 8, step)
	slow := replica(t, 1, step)
	return &slowShareRig{targets: []string{fast1, fast2, slow}, slow: slow}
}

// run drives requests (after as many warm-up ones) with lb and checks that
// every one completed and is accounted to one of the replicas.
func (r *slowShareRig) run(t testing.TB, lb string, requests int) bench.Result {
	t.Helper()
	conn, err := bench.DialTargets(r.targets, lb, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The warm-up covers the weights' blackout period and the first
	// reports, so the measured requests see settled weights.
	res, err := bench.Run(ctx, inferencev1.NewInferenceServiceClient(conn), bench.Config{
		Concurrency: 12, Requests: requests, Warmup: requests, Seed: 1,
		PromptLen: bench.Fixed{N: 8}, OutputLen: bench.Fixed{N: 8}, IgnoreEOS: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for target, s := range res.ByTarget {
		if !slices.Contains(r.targets, target) {
			t.Errorf("%s: by_target names %q, not a replica (%v)", lb, target, r.targets)
		}
		total += s.Requests
	}
	if total != res.Requests || res.Requests != requests {
		t.Errorf("%s: by_target counts %d requests, the run %d of %d: %v", lb, total, res.Requests, requests, res.ByTarget)
	}
	return res
}

// share is the slow replica's share of res's requests.
func (r *slowShareRig) share(res bench.Result) float64 {
	return float64(res.ByTarget[r.slow].Requests) / float64(res.Requests)
}

// TestBalancedRunsAccountEveryRequest runs a closed-loop load over the
// three replicas with round_robin and with weighted_round_robin on their
// ORCA reports: every request completes and is counted against the one
// replica that served it, and round_robin, which rotates whatever the
// load, reaches all three. How much traffic the weighted policy takes
// from the slow replica depends on timing: BenchmarkSlowReplicaShare
// measures it.
func TestBalancedRunsAccountEveryRequest(t *testing.T) {
	r := newSlowShareRig(t)
	rr := r.run(t, bench.RoundRobin, 60)
	if len(rr.ByTarget) != len(r.targets) {
		t.Errorf("round_robin reached %d of %d replicas: %v", len(rr.ByTarget), len(r.targets), rr.ByTarget)
	}
	r.run(t, bench.WeightedRoundRobin, 60)
}

// BenchmarkSlowReplicaShare measures the slow replica's share of the
// requests under round_robin (about 1/3) and weighted_round_robin (less:
// its ORCA reports say it is saturated), with throughput and p99 TTFT;
// the figures belong in BENCHMARKS.md with the machine.
//
//	go test ./bench -run '^$' -bench SlowReplicaShare -benchtime 1x
func BenchmarkSlowReplicaShare(b *testing.B) {
	r := newSlowShareRig(b)
	for b.Loop() {
		rr := r.run(b, bench.RoundRobin, 240)
		wrr := r.run(b, bench.WeightedRoundRobin, 240)
		b.ReportMetric(r.share(rr), "slow-share-rr")
		b.ReportMetric(r.share(wrr), "slow-share-wrr")
		b.ReportMetric(rr.RequestThroughput, "req/s-rr")
		b.ReportMetric(wrr.RequestThroughput, "req/s-wrr")
		b.ReportMetric(rr.TTFT.P99, "p99-ttft-ms-rr")
		b.ReportMetric(wrr.TTFT.P99, "p99-ttft-ms-wrr")
	}
}
