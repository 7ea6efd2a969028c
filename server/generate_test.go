package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
)

func TestGenerateFake(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	req := textPrompt("hello there, this prompt spans a few KV blocks of sixteen", 40)
	req.RequestId = "r1"
	got := h.generate(ctx, req)
	if got.err != nil {
		t.Fatal(got.err)
	}
	prompt := fakeTokenizer{}.Encode("hello there, this prompt spans a few KV blocks of sixteen", true, false)
	want := refGenerate(prompt, 40)
	if diff := cmp.Diff(want, got.tokens); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
	if got.text != (fakeTokenizer{}).Decode(want) {
		t.Errorf("text %q, want %q", got.text, fakeTokenizer{}.Decode(want))
	}
	f := got.final
	if f.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_LENGTH || f.GetRequestId() != "r1" ||
		f.GetUsage().GetPromptTokens() != int32(len(prompt)) || f.GetUsage().GetCompletionTokens() != 40 {
		t.Errorf("final %v", f)
	}
	if f.GetTimings().GetTotal().AsDuration() < f.GetTimings().GetTimeToFirstToken().AsDuration() {
		t.Errorf("total %v < ttft %v", f.GetTimings().GetTotal(), f.GetTimings().GetTimeToFirstToken())
	}

	// Token-id prompts are used as given, and the same prompt again hits
	// the prefix cache.
	ids := &inferencev1.GenerateRequest{
		Prompt:   &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: prompt}},
		Stopping: &inferencev1.StoppingCriteria{MaxTokens: 40},
	}
	again := h.generate(ctx, ids)
	if again.err != nil {
		t.Fatal(again.err)
	}
	if diff := cmp.Diff(want, again.tokens); diff != "" {
		t.Errorf("token-id prompt (-want +got):\n%s", diff)
	}
	if again.final.GetUsage().GetCachedTokens() == 0 {
		t.Errorf("second identical prompt reused no cached tokens: %v", again.final.GetUsage())
	}

	// A stop string ends generation; the text stops before it.
	full := fakeTokenizer{}.Decode(want)
	stop := full[10:12]
	req = textPrompt("hello there, this prompt spans a few KV blocks of sixteen", 40)
	req.Stopping.Stop = []string{stop}
	st := h.generate(ctx, req)
	if st.err != nil {
		t.Fatal(st.err)
	}
	if st.final.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_STOP_SEQUENCE ||
		st.text != full[:strings.Index(full, stop)] {
		t.Errorf("stop %q: text %q reason %v, want text %q", stop, st.text, st.final.GetFinishReason(), full[:strings.Index(full, stop)])
	}
}

// TestConcurrentStreamsStalledReader runs 32 streams of different lengths;
// stream 0 reads nothing until all the others have completed, which they do
// (the scheduler never waits for a client), and then reads its whole, long
// output intact.
func TestConcurrentStreamsStalledReader(t *testing.T) {
	// A fixed 64 KiB window (no BDP growth) so the stalled stream's Send
	// really blocks on flow control.
	h := newHarness(t, harnessOpts{dialOpts: []grpc.DialOption{grpc.WithInitialWindowSize(64 << 10), grpc.WithInitialConnWindowSize(64 << 10)}})
	ctx := context.Background()
	const n = 32
	const stalledLen = 8000
	prompts := make([]string, n)
	lens := make([]int32, n)
	for i := range n {
		prompts[i] = fmt.Sprintf("stream %d says", i)
		lens[i] = int32(1 + 13*i)
	}
	lens[0] = stalledLen
	stalled, err := h.client.Generate(ctx, textPrompt(prompts[0], lens[0]))
	if err != nil {
		t.Fatal(err)
	}
	results := make([]genResult, n)
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() { results[i] = h.generate(ctx, textPrompt(prompts[i], lens[i])) })
	}
	wg.Wait() // every other stream completed while stream 0 has read nothing
	results[0] = collect(stalled)
	for i, r := range results {
		if r.err != nil {
			t.Errorf("stream %d: %v", i, r.err)
			continue
		}
		want := refGenerate(fakeTokenizer{}.Encode(prompts[i], true, false), int(lens[i]))
		if !cmp.Equal(want, r.tokens) {
			t.Errorf("stream %d: %d tokens, want %d (first diff somewhere)", i, len(r.tokens), len(want))
		}
		if r.final.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_LENGTH {
			t.Errorf("stream %d: finish %v", i, r.final.GetFinishReason())
		}
	}
	if results[0].messages < 2 {
		t.Errorf("stalled stream got %d messages", results[0].messages)
	}
}

// TestCancelMidStream cancels one of two running streams: after the
// scheduler's next steps its KV blocks are no longer held, and the other
// stream completes unaffected.
func TestCancelMidStream(t *testing.T) {
	h := newHarness(t, harnessOpts{gated: true})
	ctx := context.Background()
	long := make([]int32, 4000) // 250 blocks of 16
	for i := range long {
		long[i] = 3 + int32('a'+i%26)
	}
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	a, err := h.client.Generate(actx, &inferencev1.GenerateRequest{
		RequestId: "A",
		Prompt:    &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: long}},
		Stopping:  &inferencev1.StoppingCriteria{MaxTokens: 5000},
	})
	if err != nil {
		t.Fatal(err)
	}
	breq := textPrompt("bee", 1000) // at most ceil((4+1000)/16) = 63 blocks
	breq.RequestId = "B"
	b, err := h.client.Generate(ctx, breq)
	if err != nil {
		t.Fatal(err)
	}
	first := func(s grpc.ServerStreamingClient[inferencev1.GenerateResponse]) <-chan error {
		c := make(chan error, 1)
		go func() {
			_, err := s.Recv()
			c <- err
		}()
		return c
	}
	aFirst, bFirst := first(a), first(b)
	for aFirst != nil || bFirst != nil {
		select {
		case h.model.Gate <- struct{}{}:
		case err := <-aFirst:
			if err != nil {
				t.Fatal(err)
			}
			aFirst = nil
		case err := <-bFirst:
			if err != nil {
				t.Fatal(err)
			}
			bFirst = nil
		}
	}
	// The loop publishes Stats after it has handed the step's tokens to the
	// streams, so a reader can see a token before the snapshot that counts
	// it. The next step takes the gate only after that publish.
	h.model.Gate <- struct{}{}
	before := h.sched.Stats()
	if before.Running != 2 || before.KVBlocksUsed < 250 {
		t.Fatalf("before cancel: running %d, KV blocks used %d; want 2 and >= 250", before.Running, before.KVBlocksUsed)
	}
	acancel()
	// The cancellation reaches the scheduler two ways, and either may come
	// first: the door's follow goroutine sees A's context end and cancels
	// its stream, or the scheduler's own watch on that context drops A as
	// it assembles its next step (while the gated step before it may still
	// be waiting) and sends A's Final, which the door then reads instead.
	// Steps run until A's Final is in.
	finalA := h.finalChan("A")
	for done := false; !done; {
		select {
		case h.model.Gate <- struct{}{}:
		case f := <-finalA:
			if f.Reason != 4 { // scheduler.FinishCancelled
				t.Errorf("A finished with %v, want cancelled", f.Reason)
			}
			done = true
		}
	}
	// Two more steps: the first completes (and publishes Stats) before the
	// second starts.
	h.model.Gate <- struct{}{}
	h.model.Gate <- struct{}{}
	after := h.sched.Stats()
	if after.Running != 1 || after.KVBlocksUsed > 63 {
		t.Errorf("after cancel: running %d, KV blocks used %d; want 1 and <= 63", after.Running, after.KVBlocksUsed)
	}
	if after.KVBlocksUsed+after.KVBlocksCached+after.KVBlocksFree != after.KVBlocksTotal {
		t.Errorf("KV ledger does not add up: %+v", after)
	}
	// The model is running a step meanwhile, so the metric may show a later
	// snapshot: B alone, at most 63 blocks.
	if got, most := gaugeValue(t, h.srv, "weft_kv_cache_usage_perc"), 63/float64(after.KVBlocksTotal); got > most || got == 0 {
		t.Errorf("weft_kv_cache_usage_perc %v, want in (0, %v]", got, most)
	}
	h.openGate()
	ra := collect(a)
	if code, _ := errorInfo(t, ra.err); code != codes.Canceled {
		t.Errorf("A ended with %v, want Canceled", ra.err)
	}
	rb := collect(b)
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	want := refGenerate(fakeTokenizer{}.Encode("bee", true, false), 1000) // the first chunk was read above
	if len(rb.tokens) == 0 || !cmp.Equal(want[len(want)-len(rb.tokens):], rb.tokens) || rb.final.GetUsage().GetCompletionTokens() != 1000 {
		t.Errorf("B: %d tokens after the first chunk, final %v", len(rb.tokens), rb.final)
	}
}
