package frontdoor

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/scheduler"
	"github.com/weft-inference/weft/scheduler/schedtest"
)

// followRig is a scheduler of one sequence at a time on the fake model
// (each step takes stepDur of the bubble's clock) and a Door over it.
type followRig struct {
	sched *scheduler.Scheduler
	door  *Door
	reg   *prometheus.Registry
}

const stepDur = 10 * time.Millisecond

func newFollowRig(t *testing.T, queueTimeout time.Duration) *followRig {
	t.Helper()
	m := schedtest.NewModel(16, 64)
	m.OnStep = func(int, []batch.SeqStep) { time.Sleep(stepDur) }
	sched, err := scheduler.New(scheduler.Config{BlockSize: 16, NumBlocks: 64, MaxSeqs: 1, ContextLen: 512,
		NewDecoder: func() scheduler.TextDecoder { return schedtest.Bytes{} },
		IsEOG:      func(int32) bool { return false }, VocabSize: 300}, m)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // ends at cleanup
		defer close(done)
		sched.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	reg := prometheus.NewRegistry()
	d, err := New(Config{Tokenizer: byteTok{}, Limits: sched.Limits(), QueueTimeout: queueTimeout,
		Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return &followRig{sched: sched, door: d, reg: reg}
}

// submit submits a request of maxTokens and follows it; the ending comes
// on the returned channel, each Final the metrics recorded on finals.
func (r *followRig) submit(t *testing.T, ctx context.Context, maxTokens int, finals chan<- *scheduler.Final, abandoned chan<- struct{}) <-chan Followed {
	t.Helper()
	st, err := r.sched.Submit(ctx, r.door.Request("r", []int32{10, 11, 12}, Options{MaxTokens: &maxTokens}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan Followed, 1)
	r.door.Follow(ctx, st, Follow{
		Door:      "test",
		Start:     time.Now(),
		Send:      func(scheduler.Event) error { return nil },
		Done:      func(f Followed) { done <- f },
		Abandoned: func() { abandoned <- struct{}{} },
		Finished:  func(f *scheduler.Final) { finals <- f },
	})
	return done
}

// successes are weft_request_success_total's values by finished_reason.
func successes(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "weft_request_success_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + " "
			}
			out[key] = m.GetCounter().GetValue()
		}
	}
	return out
}

// TestFollowQueueTimeout: a request the scheduler does not admit within
// the queue timeout ends with ErrQueueTimeout (a full queue's refusal),
// nothing sent; its Final is counted as a timeout.
func TestFollowQueueTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newFollowRig(t, 5*stepDur)
		ctx := t.Context()
		finals := make(chan *scheduler.Final, 2)
		abandoned := make(chan struct{}, 2)
		first := r.submit(t, ctx, 20, finals, abandoned) // holds the one slot for 20 steps
		second := r.submit(t, ctx, 20, finals, abandoned)
		got := <-second
		if !errors.Is(got.Err, ErrQueueTimeout) || !errors.Is(got.Err, scheduler.ErrQueueFull) || got.Final.Reason != scheduler.FinishTimeout {
			t.Errorf("second: %+v, want ErrQueueTimeout with a FinishTimeout Final", got)
		}
		if f := <-first; f.Err != nil || f.Final.Reason != scheduler.FinishLength {
			t.Errorf("first: %+v", f)
		}
		<-finals
		<-finals
		want := map[string]float64{"door=test finished_reason=length ": 1, "door=test finished_reason=timeout ": 1}
		if diff := cmp.Diff(want, successes(t, r.reg)); diff != "" {
			t.Errorf("weft_request_success_total (-want +got):\n%s", diff)
		}
	})
}

// TestFollowAbandoned: when the door's context ends, Follow cancels the
// sequence, reports the context's error at once and records the Final
// the scheduler sends at its next step.
func TestFollowAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newFollowRig(t, 0)
		ctx, cancel := context.WithCancel(t.Context())
		finals := make(chan *scheduler.Final, 1)
		abandoned := make(chan struct{}, 1)
		done := r.submit(t, ctx, 100, finals, abandoned)
		time.Sleep(3 * stepDur)
		cancel()
		if got := <-done; !errors.Is(got.Err, context.Canceled) || got.Final != nil {
			t.Errorf("ending %+v, want context.Canceled and no Final yet", got)
		}
		<-abandoned
		if f := <-finals; f.Reason != scheduler.FinishCancelled {
			t.Errorf("recorded Final %+v, want cancelled", f)
		}
		want := map[string]float64{"door=test finished_reason=cancelled ": 1}
		if diff := cmp.Diff(want, successes(t, r.reg)); diff != "" {
			t.Errorf("weft_request_success_total (-want +got):\n%s", diff)
		}
	})
}
