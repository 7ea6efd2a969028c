package server

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/scheduler"
)

// End to end: with one running slot and one waiting place, a third request
// is refused at once with RESOURCE_EXHAUSTED / QUEUE_FULL and RetryInfo,
// while the other two complete.
func TestQueueFullEndToEnd(t *testing.T) {
	h := newHarness(t, harnessOpts{gated: true, sched: func(c *scheduler.Config) {
		c.MaxSeqs = 1
		c.MaxWaiting = 1
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	a, err := h.client.Generate(ctx, textPrompt("first", 8))
	if err != nil {
		t.Fatal(err)
	}
	h.model.Gate <- struct{}{} // one step: a is admitted and gets a token
	if _, err := a.Recv(); err != nil {
		t.Fatalf("first request: %v", err)
	}

	// a holds the only slot (its next step waits on the gate). Of b and c one
	// takes the waiting place and the other must be refused at once.
	type outcome struct {
		name string
		err  error
	}
	first := make(chan outcome, 2)
	for _, name := range []string{"b", "c"} {
		s, err := h.client.Generate(ctx, textPrompt(name, 4))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := s.Recv()
			first <- outcome{name, err}
			for err == nil {
				_, err = s.Recv()
			}
		}()
	}
	got := <-first
	code, reason := errorInfo(t, got.err)
	if code != codes.ResourceExhausted || reason != ReasonQueueFull {
		t.Fatalf("request %s: %v (code %v, reason %q), want RESOURCE_EXHAUSTED / %s", got.name, got.err, code, reason, ReasonQueueFull)
	}
	var retry *errdetails.RetryInfo
	for _, d := range status.Convert(got.err).Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	if retry == nil || retry.GetRetryDelay().AsDuration() <= 0 {
		t.Errorf("QUEUE_FULL without a positive RetryInfo delay: %v", retry)
	}

	h.openGate()
	if r := collect(a); r.err != nil || r.final == nil {
		t.Fatalf("first request did not complete: %v", r.err)
	}
	if other := <-first; other.err != nil {
		t.Errorf("the waiting request %s failed: %v", other.name, other.err)
	}
}

// closedGate is a Capacity that admits nothing: every request waits.
type closedGate struct{}

func (closedGate) AdmitOK() (bool, string) { return false, "test: closed" }

// TestQueueTimeoutIsQueueFull: a request not admitted within the queue
// timeout gets what a full queue gets (RESOURCE_EXHAUSTED / QUEUE_FULL
// with RetryInfo), on Generate as its status and in Chat as the turn's
// TurnError, the stream going on.
func TestQueueTimeoutIsQueueFull(t *testing.T) {
	h := newHarness(t, harnessOpts{
		sched: func(c *scheduler.Config) { c.Capacity = closedGate{} },
		door:  func(c *frontdoor.Config) { c.QueueTimeout = 10 * time.Millisecond },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := h.generate(ctx, textPrompt("never admitted", 4))
	if code, reason := errorInfo(t, got.err); code != codes.ResourceExhausted || reason != ReasonQueueFull || got.final != nil {
		t.Errorf("Generate: %v, final %v; want RESOURCE_EXHAUSTED / %s and no Final", got.err, got.final, ReasonQueueFull)
	}
	hasRetry := false
	for _, d := range status.Convert(got.err).Details() {
		_, ok := d.(*errdetails.RetryInfo)
		hasRetry = hasRetry || ok
	}
	if !hasRetry {
		t.Errorf("Generate's queue timeout has no RetryInfo")
	}

	s, err := h.client.Chat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var turns []string
	for range 2 { // each turn waits for the one before to be refused
		if err := s.Send(chatTurn(&inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{user("hi")}})); err != nil {
			t.Fatal(err)
		}
		m, err := s.Recv()
		if err != nil {
			t.Fatalf("Chat: %v", err)
		}
		turns = append(turns, fmt.Sprintf("%d %s", m.GetTurn(), m.GetError().GetReason()))
	}
	s.CloseSend()
	if _, err := s.Recv(); err != io.EOF {
		t.Errorf("Chat after the refused turns: %v, want the stream to end cleanly", err)
	}
	if diff := cmp.Diff([]string{"0 " + ReasonQueueFull, "1 " + ReasonQueueFull}, turns); diff != "" {
		t.Errorf("Chat turns (-want +got):\n%s", diff)
	}
}
