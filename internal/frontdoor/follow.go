package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/weft-inference/weft/scheduler"
)

// ErrQueueTimeout ends a request the scheduler did not admit within
// Config.QueueTimeout. It wraps scheduler.ErrQueueFull: every door
// answers it as it answers a full queue (the request never ran, so the
// client retries it as a refused one), never with a Final.
var ErrQueueTimeout = fmt.Errorf("%w: not admitted within the queue timeout", scheduler.ErrQueueFull)

// errNoFinal: the scheduler closed a stream without its Final.
var errNoFinal = errors.New("scheduler stream ended without a final event")

// Follow says how to follow one submitted sequence's stream.
type Follow struct {
	// Door labels the sequence's metrics (DoorGRPC, DoorOpenAI,
	// DoorAnthropic, DoorResponses).
	Door string
	// Start is the request's arrival (e2e latency, trace spans).
	Start time.Time
	// Send hands one event to the door (which writes it to its client, or
	// to the goroutine that does): every event with tokens or text, and
	// the Final. Only the following goroutine calls it. An error ends the
	// following and cancels the sequence.
	Send func(scheduler.Event) error
	// Done is called once, by the following goroutine, when it ends.
	Done func(Followed)
	// Abandoned, when set, is called when the sequence was given up
	// before its Final (ctx ended, or Send failed on an event without
	// one); its Final is recorded later (tests).
	Abandoned func()
	// Finished, when set, is called with the Final once it is recorded in
	// the metrics (tests).
	Finished func(*scheduler.Final)
}

// Followed is how a following ended.
type Followed struct {
	// Final is the sequence's Final; nil when the following ended before
	// it (ctx ended, Send failed, or the stream closed without one).
	Final *scheduler.Final
	// Err is nil when the Final was sent. Otherwise: Send's error, ctx's,
	// ErrQueueTimeout (the Final said FinishTimeout: it is not sent), or
	// the stream closing without a Final.
	Err error
}

// Follow starts the one goroutine that reads st and calls f.Send, until
// the Final was sent, Send failed or ctx ended; then it calls f.Done.
// Each sequence's Final is recorded in the per-request metrics, labelled
// f.Door: before it is sent, or, when the sequence was abandoned
// (cancelled), when the scheduler sends it at its next step, after f.Done
// so that a door is not held for that step.
//
// The returned channel fires when one Send has been blocked for
// Config.SendStallTimeout: a door that selects on it cancels the stream
// and ends it (the following goroutine then goes on once the blocked
// Send fails, when the door has returned).
func (d *Door) Follow(ctx context.Context, st *scheduler.Stream, f Follow) (stalled <-chan time.Time) {
	stall := time.NewTimer(time.Hour)
	stall.Stop()
	go d.follow(ctx, st, f, stall)
	return stall.C
}

func (d *Door) follow(ctx context.Context, st *scheduler.Stream, f Follow, stall *time.Timer) {
	record := func(fin *scheduler.Final) {
		d.metrics.observe(ctx, f.Door, f.Start, fin)
		if f.Finished != nil {
			f.Finished(fin)
		}
	}
	var res Followed
	abandoned := false // given up before the Final; it comes later
	defer func() {
		f.Done(res)
		if abandoned {
			if f.Abandoned != nil {
				f.Abandoned()
			}
			if fin := awaitFinal(st); fin != nil {
				record(fin)
			}
		}
	}()
	send := func(ev scheduler.Event) error {
		stall.Reset(d.cfg.SendStallTimeout)
		defer stall.Stop()
		return f.Send(ev)
	}
	for {
		ev, err := st.Recv(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				res.Err = errNoFinal
				return
			}
			st.Cancel()
			abandoned, res.Err = true, err
			return
		}
		if ev.Final != nil {
			// Recorded before the door sends it: a client that has the
			// Final finds its request in the metrics.
			record(ev.Final)
			res.Final = ev.Final
			if ev.Final.Reason == scheduler.FinishTimeout {
				// Never admitted, so no tokens: a refusal, not a Final.
				res.Err = ErrQueueTimeout
				return
			}
		}
		if len(ev.Tokens) > 0 || ev.Text != "" || ev.Final != nil {
			if err := send(ev); err != nil {
				st.Cancel()
				res.Err = err
				abandoned = ev.Final == nil
				return
			}
		}
		if ev.Final != nil {
			return
		}
	}
}

// awaitFinal reads a cancelled stream to its Final (the scheduler sends it
// at its next step); nil if the stream ends without one.
func awaitFinal(st *scheduler.Stream) *scheduler.Final {
	for {
		ev, err := st.Recv(context.Background())
		if err != nil {
			return nil
		}
		if ev.Final != nil {
			return ev.Final
		}
	}
}
