package server

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/tokenizer"
	"github.com/weft-inference/weft/scheduler"
)

// TestBadInputs sends each bad request over a real loopback listener and
// checks its code and ErrorInfo reason; after all of them (and garbage
// bytes on the port) the server still serves a good request.
func TestBadInputs(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOpts{listener: lis, sched: func(c *scheduler.Config) { c.ContextLen = 1000 }})
	ctx := context.Background()
	withStop := func(f func(*inferencev1.GenerateRequest)) *inferencev1.GenerateRequest {
		r := textPrompt("hello", 8)
		f(r)
		return r
	}
	longIDs := make([]int32, 1000)
	for i := range longIDs {
		longIDs[i] = 3 + 'x'
	}
	tests := []struct {
		name       string
		req        *inferencev1.GenerateRequest
		wantCode   codes.Code
		wantReason string
	}{
		{"no prompt", &inferencev1.GenerateRequest{}, codes.InvalidArgument, ReasonEmptyPrompt},
		{"empty text", textPrompt("", 8), codes.InvalidArgument, ReasonEmptyPrompt},
		{"empty ids", &inferencev1.GenerateRequest{Prompt: &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{}}}, codes.InvalidArgument, ReasonEmptyPrompt},
		{"negative max_tokens", textPrompt("hello", -1), codes.InvalidArgument, ReasonInvalidParameter},
		{"huge max_tokens", textPrompt("hello", 1<<30), codes.InvalidArgument, ReasonInvalidParameter},
		{"top_p 7", withStop(func(r *inferencev1.GenerateRequest) { r.Sampling = &inferencev1.SamplingParams{TopP: 7} }), codes.InvalidArgument, ReasonInvalidParameter},
		{"negative temperature", withStop(func(r *inferencev1.GenerateRequest) { r.Sampling = &inferencev1.SamplingParams{Temperature: -1} }), codes.InvalidArgument, ReasonInvalidParameter},
		{"top_n 1000", withStop(func(r *inferencev1.GenerateRequest) { r.Logprobs = &inferencev1.LogprobOptions{TopN: 1000} }), codes.InvalidArgument, ReasonInvalidParameter},
		{"unknown stop token id", withStop(func(r *inferencev1.GenerateRequest) { r.Stopping.StopTokenIds = []int32{fakeVocab} }), codes.InvalidArgument, ReasonTokenOutOfRange},
		{"empty stop string", withStop(func(r *inferencev1.GenerateRequest) { r.Stopping.Stop = []string{""} }), codes.InvalidArgument, ReasonInvalidParameter},
		{"prompt id out of vocab", &inferencev1.GenerateRequest{Prompt: &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: []int32{1, -5}}}}, codes.InvalidArgument, ReasonTokenOutOfRange},
		{"invalid UTF-8 prompt", textPrompt("abc\xff\xfe", 8), codes.InvalidArgument, ReasonInvalidUTF8},
		{"invalid UTF-8 stop", withStop(func(r *inferencev1.GenerateRequest) { r.Stopping.Stop = []string{"\xc3"} }), codes.InvalidArgument, ReasonInvalidUTF8},
		{"prompt over the context", &inferencev1.GenerateRequest{Prompt: &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: longIDs}}}, codes.InvalidArgument, ReasonPromptTooLong},
		{"text prompt over the context", textPrompt(strings.Repeat("z", 2000), 8), codes.InvalidArgument, ReasonPromptTooLong},
		// gRPC itself refuses it before the handler: no ErrorInfo.
		{"10 MB message", textPrompt(strings.Repeat("y", 10<<20), 8), codes.ResourceExhausted, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := h.generate(ctx, tt.req)
			if got.err == nil {
				t.Fatalf("no error; final %v", got.final)
			}
			code, reason := errorInfo(t, got.err)
			if code != tt.wantCode || reason != tt.wantReason {
				t.Errorf("got %v %q (%v), want %v %q", code, reason, got.err, tt.wantCode, tt.wantReason)
			}
		})
	}

	// Garbage on the port: the server drops that connection only.
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n\x00\x01\x02garbage\xff\xff\xff\xff\xff\xff\xff\xff\xff"))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.Copy(io.Discard, c) // until the server closes it
	c.Close()

	good := h.generate(ctx, textPrompt("still there?", 5))
	if good.err != nil || len(good.tokens) != 5 {
		t.Fatalf("after bad inputs: %v, %d tokens", good.err, len(good.tokens))
	}
}

func TestTokenizeDetokenizeInfo(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	tok, err := h.client.Tokenize(ctx, &inferencev1.TokenizeRequest{Text: "ab", AddSpecialTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{fakeBOS, 3 + 'a', 3 + 'b'}; !equalIDs(tok.GetTokenIds(), want) {
		t.Errorf("Tokenize = %v, want %v", tok.GetTokenIds(), want)
	}
	de, err := h.client.Detokenize(ctx, &inferencev1.DetokenizeRequest{TokenIds: tok.GetTokenIds()})
	if err != nil || de.GetText() != "ab" {
		t.Errorf("Detokenize = %q, %v", de.GetText(), err)
	}
	_, err = h.client.Detokenize(ctx, &inferencev1.DetokenizeRequest{TokenIds: []int32{fakeVocab}})
	if code, reason := errorInfo(t, err); code != codes.InvalidArgument || reason != ReasonTokenOutOfRange {
		t.Errorf("Detokenize out of range: %v", err)
	}
	_, err = h.client.Tokenize(ctx, &inferencev1.TokenizeRequest{Text: "\xff"})
	if code, reason := errorInfo(t, err); code != codes.InvalidArgument || reason != ReasonInvalidUTF8 {
		t.Errorf("Tokenize invalid UTF-8: %v", err)
	}
	info, err := h.client.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{})
	if err != nil || info.GetVocabSize() != fakeVocab || info.GetContextLength() != 40000 || !info.GetHasChatTemplate() {
		t.Errorf("GetModelInfo = %v, %v", info, err)
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStatusMapping(t *testing.T) {
	tests := []struct {
		err        error
		wantCode   codes.Code
		wantReason string
		retry      bool
	}{
		{scheduler.ErrQueueFull, codes.ResourceExhausted, ReasonQueueFull, true},
		{scheduler.ErrDraining, codes.Unavailable, ReasonDraining, true},
		{scheduler.ErrClosed, codes.Unavailable, ReasonDraining, true},
		{errServerDraining, codes.Unavailable, ReasonDraining, true},
		{scheduler.ErrPromptTooLong, codes.InvalidArgument, ReasonPromptTooLong, false},
		{scheduler.ErrInvalidRequest, codes.InvalidArgument, ReasonInvalidParameter, false},
		{context.Canceled, codes.Canceled, ReasonCancelled, false},
		{context.DeadlineExceeded, codes.DeadlineExceeded, ReasonDeadlineExceeded, false},
		{errSlowReader, codes.ResourceExhausted, ReasonSlowReader, false},
		{io.ErrUnexpectedEOF, codes.Internal, ReasonInternal, false},
		{status.Error(codes.Unavailable, "transport is closing"), codes.Unavailable, "Unavailable", false},
	}
	for _, tt := range tests {
		err := Status(wrap(tt.err))
		code, reason := errorInfo(t, err)
		var retry bool
		for _, d := range status.Convert(err).Details() {
			if _, ok := d.(*errdetails.RetryInfo); ok {
				retry = true
			}
		}
		if code != tt.wantCode || reason != tt.wantReason || retry != tt.retry {
			t.Errorf("Status(%v) = %v %q retry %v, want %v %q retry %v", tt.err, code, reason, retry, tt.wantCode, tt.wantReason, tt.retry)
		}
	}
}

func wrap(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return &wrapped{err}
}

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "outer: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

// TestDrainingRefuses checks that a draining scheduler's refusal reaches
// the client as Unavailable/DRAINING.
func TestDrainingRefuses(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.sched.Drain()
	got := h.generate(context.Background(), textPrompt("hi", 3))
	if code, reason := errorInfo(t, got.err); code != codes.Unavailable || reason != ReasonDraining {
		t.Errorf("got %v", got.err)
	}
}

func TestAuthAndHealth(t *testing.T) {
	h := newHarness(t, harnessOpts{noServing: true, server: func(c *Config) { c.AuthToken = "s3cret" }})
	ctx := context.Background()
	hc := healthpb.NewHealthClient(h.conn)
	check := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: ServiceName})
		if err != nil || r.GetStatus() != want {
			t.Errorf("health = %v, %v; want %v", r.GetStatus(), err, want)
		}
	}
	check(healthpb.HealthCheckResponse_NOT_SERVING) // health needs no token
	h.srv.SetServing(true)
	check(healthpb.HealthCheckResponse_SERVING)

	_, err := h.client.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{})
	if code, reason := errorInfo(t, err); code != codes.Unauthenticated || reason != ReasonUnauthenticated {
		t.Errorf("no token: %v", err)
	}
	bad := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer nope")
	if got := h.generate(bad, textPrompt("hi", 2)); status.Code(got.err) != codes.Unauthenticated {
		t.Errorf("bad token: %v", got.err)
	}
	good := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret")
	if got := h.generate(good, textPrompt("hi", 2)); got.err != nil || len(got.tokens) != 2 {
		t.Errorf("good token: %v", got.err)
	}
}

// bigDecoder makes every token 100 bytes of text, so an unread stream
// fills the client's flow-control window after a few hundred tokens.
type bigDecoder struct{}

func (bigDecoder) Add(id int32) string { return strings.Repeat(string(rune(id-3)), 100) }
func (bigDecoder) Flush() string       { return "" }

// TestSlowReaderCutOff: a client that reads nothing is cut off with
// SLOW_READER once a Send has been blocked past the limit, and its sequence
// is cancelled.
func TestSlowReaderCutOff(t *testing.T) {
	h := newHarness(t, harnessOpts{
		sched: func(c *scheduler.Config) {
			c.NewDecoder = func() scheduler.TextDecoder { return bigDecoder{} }
		},
		door:     func(c *frontdoor.Config) { c.SendStallTimeout = 100 * time.Millisecond },
		dialOpts: []grpc.DialOption{grpc.WithInitialWindowSize(64 << 10), grpc.WithInitialConnWindowSize(64 << 10)},
	})
	const n = 39000
	req := textPrompt("slow", n)
	req.RequestId = "slow"
	s, err := h.client.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	f := <-h.finalChan("slow") // the request ended on the server
	if f.Reason != scheduler.FinishCancelled || f.CompletionTokens >= n {
		t.Errorf("slow request finished %v after %d tokens, want cancelled before %d", f.Reason, f.CompletionTokens, n)
	}
	got := collect(s)
	if code, reason := errorInfo(t, got.err); code != codes.ResourceExhausted || reason != ReasonSlowReader {
		t.Errorf("slow reader got %v", got.err)
	}
	// The server goes on serving.
	if got := h.generate(context.Background(), textPrompt("next", 3)); got.err != nil {
		t.Errorf("after a cut-off stream: %v", got.err)
	}
}

// TestShutdown: health turns NOT_SERVING, an in-flight stream finishes,
// then Shutdown returns and new streams are refused.
func TestShutdown(t *testing.T) {
	h := newHarness(t, harnessOpts{gated: true})
	ctx := context.Background()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watch, err := healthpb.NewHealthClient(h.conn).Watch(wctx, &healthpb.HealthCheckRequest{Service: ServiceName})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v, %v", r, err)
	}
	s, err := h.client.Generate(ctx, textPrompt("in flight", 20))
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { _, err := s.Recv(); first <- err }()
	for waiting := true; waiting; {
		select {
		case h.model.Gate <- struct{}{}:
		case err := <-first:
			if err != nil {
				t.Fatal(err)
			}
			waiting = false
		}
	}
	down := make(chan struct{})
	go func() {
		h.srv.Shutdown(ctx)
		close(down)
	}()
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health during shutdown %v, %v", r, err)
	}
	wcancel() // a Watch stream would otherwise hold GracefulStop until the deadline
	select {
	case <-down:
		t.Fatal("Shutdown returned with a stream in flight")
	default:
	}
	h.openGate()
	got := collect(s)
	if got.err != nil || got.final.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_LENGTH {
		t.Errorf("in-flight stream: %v, final %v", got.err, got.final)
	}
	<-down
	if got := h.generate(ctx, textPrompt("late", 2)); got.err == nil {
		t.Errorf("a new stream after Shutdown succeeded")
	}
}

// TestShutdownDeadline: a stream still running at the drain deadline is
// cut off (Stop) and Shutdown returns.
func TestShutdownDeadline(t *testing.T) {
	h := newHarness(t, harnessOpts{gated: true}) // the model never steps
	s, err := h.client.Generate(context.Background(), textPrompt("stuck", 20))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Header(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	h.srv.Shutdown(ctx)
	if got := collect(s); got.err == nil {
		t.Errorf("stuck stream ended without error: %v", got.final)
	}
}

// panicTokenizer panics in Encode, standing in for a bug in a handler.
type panicTokenizer struct{ fakeTokenizer }

func (panicTokenizer) Encode(string, bool, bool) []int32 { panic("boom") }

func (panicTokenizer) EncodeSegments([]tokenizer.Segment, bool) []int32 { panic("boom") }

// TestPanicRecovery: a panic in a handler becomes INTERNAL for that call;
// the server goes on serving.
func TestPanicRecovery(t *testing.T) {
	h := newHarness(t, harnessOpts{door: func(c *frontdoor.Config) { c.Tokenizer = panicTokenizer{} }})
	ctx := context.Background()
	_, err := h.client.Tokenize(ctx, &inferencev1.TokenizeRequest{Text: "x"})
	if code, reason := errorInfo(t, err); code != codes.Internal || reason != ReasonInternal {
		t.Errorf("unary panic: %v", err)
	}
	got := h.generate(ctx, textPrompt("x", 2))
	if code, reason := errorInfo(t, got.err); code != codes.Internal || reason != ReasonInternal {
		t.Errorf("streaming panic: %v", got.err)
	}
	if _, err := h.client.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{}); err != nil {
		t.Errorf("after panics: %v", err)
	}
}
