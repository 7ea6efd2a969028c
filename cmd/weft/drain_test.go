package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/server"
)

// guardBackend is a backend whose Close checks that no forward pass is in
// progress and that none comes after it: the scheduler loop must have
// ended before serve's caller releases weights and KV memory.
type guardBackend struct {
	batch.Backend
	inFlight  atomic.Int32
	closed    atomic.Bool
	violation atomic.Value // string: what went wrong first
}

func (g *guardBackend) fail(msg string) { g.violation.CompareAndSwap(nil, msg) }

func (g *guardBackend) Forward(ctx context.Context, seqs []batch.SeqStep, logits [][]float32) error {
	g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	if g.closed.Load() {
		g.fail("Forward called after Close")
		return errors.New("guardBackend: closed")
	}
	return g.Backend.Forward(ctx, seqs, logits)
}

func (g *guardBackend) Close() error {
	g.closed.Store(true)
	if n := g.inFlight.Load(); n != 0 {
		g.fail(fmt.Sprintf("Close with %d forward pass(es) in progress", n))
	}
	return g.Backend.Close()
}

// streamEnd is how one client stream ended.
type streamEnd struct {
	tokens int
	final  bool // a Final message and a clean end
	code   codes.Code
	reason string // ErrorInfo reason
	retry  bool   // RetryInfo present
}

func readStream(s grpc.ServerStreamingClient[inferencev1.GenerateResponse], first chan<- struct{}) streamEnd {
	var e streamEnd
	signalled := false
	for {
		r, err := s.Recv()
		if err == io.EOF {
			return e
		}
		if err != nil {
			st := status.Convert(err)
			e.code = st.Code()
			for _, d := range st.Details() {
				switch d := d.(type) {
				case *errdetails.ErrorInfo:
					e.reason = d.Reason
				case *errdetails.RetryInfo:
					e.retry = true
				}
			}
			if !signalled {
				close(first)
			}
			return e
		}
		e.tokens += len(r.GetChunk().GetTokenIds())
		if r.GetFinal() != nil {
			e.final = true
		}
		if !signalled && e.tokens > 0 {
			signalled = true
			close(first)
		}
	}
}

// drainRound serves stories260K on a fresh backend, starts streams long
// generations, waits until each has produced a token, then sends the first
// "signal" (cancels serve's context) and, with second, the second one
// (closes Force). It checks that serve returns nil, that every stream
// ended normally or with UNAVAILABLE / DRAINING + RetryInfo, and that the
// backend was not in use when it was closed.
func drainRound(t *testing.T, m *runtime.Model, streams int, drainTimeout time.Duration, second bool) (drained int) {
	t.Helper()
	cb, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: "f16", Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	b := &guardBackend{Backend: cb}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseServeFlags([]string{"--backend", "cpu", "--drain-timeout", drainTimeout.String()})
	if err != nil {
		t.Fatal(err)
	}
	force := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startWhenReady(t, func(ready chan<- struct{}) error {
		return serve(ctx, c, serveDeps{Model: m, Backend: b, Log: slog.New(slog.DiscardHandler), Force: force}, lis, nil, ready)
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := inferencev1.NewInferenceServiceClient(conn)
	maxTokens := int32(m.HP.ContextLen - 8)
	ends := make([]streamEnd, streams)
	var wg sync.WaitGroup
	firsts := make([]chan struct{}, streams)
	for i := range streams {
		seed := uint64(i + 1)
		s, err := client.Generate(context.Background(), &inferencev1.GenerateRequest{
			Prompt:   &inferencev1.GenerateRequest_Text{Text: "Once upon a time"},
			Sampling: &inferencev1.SamplingParams{Temperature: 0.8, Seed: &seed},
			Stopping: &inferencev1.StoppingCriteria{MaxTokens: maxTokens, IgnoreEos: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		firsts[i] = make(chan struct{})
		wg.Go(func() { ends[i] = readStream(s, firsts[i]) })
	}
	for _, f := range firsts {
		<-f
	}
	cancel() // first signal
	if second {
		close(force)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve after drain = %v, want nil (exit 0)", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not return")
	}
	wg.Wait()
	b.Close() // as loadAndServe's deferred Close does
	if v := b.violation.Load(); v != nil {
		t.Errorf("backend: %s", v)
	}
	for i, e := range ends {
		switch {
		case e.final && e.code == codes.OK:
		case e.code == codes.Unavailable && e.reason == server.ReasonDraining && e.retry:
			drained++
		default:
			t.Errorf("stream %d ended with %v %q retry %v after %d tokens (final %v); want a normal end or UNAVAILABLE/DRAINING with RetryInfo",
				i, e.code, e.reason, e.retry, e.tokens, e.final)
		}
	}
	return drained
}

func loadStories(t *testing.T) *runtime.Model {
	t.Helper()
	m, err := runtime.Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestServeDrainTimeoutStopsCleanly: long streams outlive the drain
// timeout; 20 rounds in a row, serve returns nil, the streams still running
// end with DRAINING, and the scheduler loop has ended before the backend is
// closed (issue 14 repro #1: SIGSEGV / index out of range before).
func TestServeDrainTimeoutStopsCleanly(t *testing.T) {
	m := loadStories(t)
	total := 0
	for round := range 20 {
		n := drainRound(t, m, 24, time.Millisecond, false)
		total += n
		if t.Failed() {
			t.Fatalf("round %d failed", round)
		}
	}
	t.Logf("%d of %d streams cut off by the drain timeout", total, 20*24)
	if total == 0 {
		t.Errorf("no stream was cut off by the drain timeout in 20 rounds; the test did not exercise it")
	}
}

// TestServeSecondSignalStopsCleanly: a second signal ends a long drain at
// once, with the same clean stop.
func TestServeSecondSignalStopsCleanly(t *testing.T) {
	m := loadStories(t)
	for round := range 20 {
		// With a one-hour drain timeout, only the second signal can end
		// the drain before drainRound's one-minute limit.
		if n := drainRound(t, m, 24, time.Hour, true); n == 0 {
			t.Errorf("round %d: no stream was cut off by the second signal", round)
		}
		if t.Failed() {
			t.Fatalf("round %d failed", round)
		}
	}
}
