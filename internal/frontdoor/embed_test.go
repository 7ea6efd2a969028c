package frontdoor

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/scheduler"
	"github.com/weft-inference/weft/scheduler/schedtest"
)

const embedWidth = 5

// newEmbedRig is a scheduler of at most maxSeqs sequences on the fake
// model with hidden states of embedWidth (0: none), mean pooling, a
// context of 64, and a Door over it.
func newEmbedRig(t *testing.T, maxSeqs, hidden int, gate chan struct{}, atGate func()) (*scheduler.Scheduler, *Door) {
	t.Helper()
	m := schedtest.NewModel(16, 64)
	m.Hidden = hidden
	m.Gate, m.AtGate = gate, atGate
	m.OnStep = func(int, []batch.SeqStep) { time.Sleep(stepDur) }
	sched, err := scheduler.New(scheduler.Config{BlockSize: 16, NumBlocks: 64, MaxSeqs: maxSeqs, ContextLen: 64,
		VocabSize: 300, Pooling: batch.PoolMean}, m)
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
	d, err := New(Config{Tokenizer: byteTok{}, Limits: sched.Limits(), MaxPromptBytes: 100, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return sched, d
}

// TestEmbed: texts and token ids, more of them than the scheduler runs at
// once, each get the vector of its tokens, in input order, and the usage
// counts every token; each sequence is in the metrics.
func TestEmbed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sched, d := newEmbedRig(t, 2, embedWidth, nil, nil)
		inputs := []EmbedInput{{Text: "hello"}, {Tokens: true, IDs: []int32{7, 8, 9}}, {Text: "a longer text of words"},
			{Text: "x"}, {Tokens: true, IDs: []int32{200}}}
		got, err := d.Embed(context.Background(), sched, EmbedRequest{Door: DoorOpenAI, Start: time.Now(), Inputs: inputs, Dimensions: embedWidth})
		if err != nil {
			t.Fatal(err)
		}
		want := &Embeddings{}
		for _, in := range inputs {
			ids := in.IDs
			if !in.Tokens {
				ids = byteTok{}.Encode(in.Text, true, false)
			}
			want.Vectors = append(want.Vectors, schedtest.ReferenceEmbedding(ids, embedWidth, batch.PoolMean))
			want.Tokens = append(want.Tokens, len(ids))
			want.PromptTokens += len(ids)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Embed (-want +got):\n%s", diff)
		}
		if n := testutil.ToFloat64(d.metrics.success.WithLabelValues(DoorOpenAI, "embedded")); n != float64(len(inputs)) {
			t.Errorf("weft_request_success_total{finished_reason=embedded} = %v, want %d", n, len(inputs))
		}
	})
}

func TestEmbedRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sched, d := newEmbedRig(t, 4, embedWidth, nil, nil)
		ctx := context.Background()
		var le *scheduler.LimitError
		var ie *InputError
		var be *BytesError
		var de *DimensionsError
		many := make([]EmbedInput, MaxEmbedInputs+1)
		for _, tc := range []struct {
			name   string
			r      EmbedRequest
			check  func(error) bool
			detail string
		}{
			{"no input", EmbedRequest{}, func(err error) bool { return errors.As(err, &le) && le.Field == "input" && le.Limit == 1 }, ""},
			{"too many", EmbedRequest{Inputs: many}, func(err error) bool { return errors.As(err, &le) && le.Limit == MaxEmbedInputs }, ""},
			{"dimensions", EmbedRequest{Inputs: []EmbedInput{{Text: "a"}}, Dimensions: 3}, func(err error) bool {
				return errors.As(err, &de) && de.Want == embedWidth && errors.Is(err, ErrDimensions)
			}, ""},
			{"empty text", EmbedRequest{Inputs: []EmbedInput{{Text: "a"}, {Text: ""}}}, func(err error) bool {
				return errors.As(err, &ie) && ie.Index == 1 && errors.Is(err, ErrEmptyInput)
			}, "input[1]: empty input"},
			{"text bytes", EmbedRequest{Inputs: []EmbedInput{{Text: strings.Repeat("a", 101)}}}, func(err error) bool {
				return errors.As(err, &ie) && ie.Index == 0 && errors.As(err, &be)
			}, ""},
			{"tokens over the context", EmbedRequest{Inputs: []EmbedInput{{Text: "a"}, {Tokens: true, IDs: make([]int32, 65)}}}, func(err error) bool {
				return errors.As(err, &ie) && ie.Index == 1 && errors.As(err, &le) && le.Limit == 64 && errors.Is(err, scheduler.ErrPromptTooLong)
			}, ""},
			{"empty ids", EmbedRequest{Inputs: []EmbedInput{{Tokens: true}}}, func(err error) bool {
				return errors.As(err, &ie) && errors.Is(err, scheduler.ErrEmptyPrompt)
			}, ""},
			{"id outside the vocabulary", EmbedRequest{Inputs: []EmbedInput{{Tokens: true, IDs: []int32{300}}}}, func(err error) bool {
				return errors.As(err, &ie) && errors.Is(err, scheduler.ErrTokenOutOfRange)
			}, ""},
		} {
			_, err := d.Embed(ctx, sched, tc.r)
			if err == nil || !tc.check(err) {
				t.Errorf("%s: %v", tc.name, err)
			}
			if tc.detail != "" && (err == nil || err.Error() != tc.detail) {
				t.Errorf("%s: error %q, want %q", tc.name, err, tc.detail)
			}
		}
		// 64 tokens, the whole context, are accepted.
		if _, err := d.Embed(ctx, sched, EmbedRequest{Inputs: []EmbedInput{{Tokens: true, IDs: make([]int32, 64)}}}); err != nil {
			t.Errorf("64 tokens: %v", err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		sched, d := newEmbedRig(t, 4, 0, nil, nil)
		if _, err := d.Embed(context.Background(), sched, EmbedRequest{Inputs: []EmbedInput{{Text: "a"}}}); !errors.Is(err, scheduler.ErrNoEmbeddings) {
			t.Errorf("a model without hidden states: %v, want ErrNoEmbeddings", err)
		}
	})
}

// TestEmbedCancel: when the caller's context ends while the inputs run,
// Embed returns at once and every sequence leaves the scheduler.
func TestEmbedCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate, atGate := make(chan struct{}), make(chan struct{}, 8)
		sched, d := newEmbedRig(t, 2, embedWidth, gate, func() { atGate <- struct{}{} })
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := d.Embed(ctx, sched, EmbedRequest{Inputs: []EmbedInput{{Text: "one"}, {Text: "two"}, {Text: "three"}}})
			errc <- err
		}()
		<-atGate // the first step, with the first two inputs, waits at the gate
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Embed: %v, want context.Canceled", err)
		}
		close(gate)
		synctest.Wait()
		if st := sched.Stats(); st.Running != 0 || st.Waiting != 0 || st.KVBlocksUsed != 0 {
			t.Errorf("after the cancel: %+v", st)
		}
	})
}
