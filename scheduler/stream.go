package scheduler

import (
	"context"
	"io"
	"sync"
)

// Stream is the output side of one submitted request. Exactly one goroutine
// reads it with Recv; the scheduler loop only appends to its mailbox and
// never waits for the reader.
type Stream struct {
	// cancel ends the request's derived context; the AfterFunc registered on
	// it tells the loop.
	cancel context.CancelFunc
	id     uint64 // the sequence id (batch.SeqStep.Seq)

	mu      sync.Mutex
	pending Event // everything not yet handed to the reader, merged
	has     bool  // pending holds something
	ended   bool  // the Final event has been handed out
	notify  chan struct{}
}

func newStream(cancel context.CancelFunc) *Stream {
	return &Stream{cancel: cancel, notify: make(chan struct{}, 1)}
}

// push appends ev to the mailbox and pokes the reader. It never blocks.
func (st *Stream) push(ev Event) {
	st.mu.Lock()
	if st.has {
		st.pending.Tokens = append(st.pending.Tokens, ev.Tokens...)
		st.pending.Text += ev.Text
		if ev.Final != nil {
			st.pending.Final = ev.Final
		}
	} else {
		st.pending = ev
		st.has = true
	}
	st.mu.Unlock()
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

// Recv blocks until at least one event is pending and returns everything
// pending merged into one Event. After the event carrying Final it returns
// io.EOF. It returns ctx.Err() when ctx ends first.
func (st *Stream) Recv(ctx context.Context) (Event, error) {
	for {
		st.mu.Lock()
		if st.has {
			ev := st.pending
			st.pending, st.has = Event{}, false
			if ev.Final != nil {
				st.ended = true
			}
			st.mu.Unlock()
			return ev, nil
		}
		ended := st.ended
		st.mu.Unlock()
		if ended {
			return Event{}, io.EOF
		}
		select {
		case <-st.notify:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// Cancel cancels the request: it leaves the batch at the next step and its
// stream ends with FinishCancelled (unless it finished first). It never
// blocks and may be called any number of times.
func (st *Stream) Cancel() { st.cancel() }
