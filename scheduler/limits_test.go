package scheduler

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weft-inference/weft/runtime/sample"
)

// limitsOf validates cfg and returns the limits a Scheduler built with it
// publishes (Scheduler.Limits reads the validated Config).
func limitsOf(t *testing.T, cfg Config) Limits {
	t.Helper()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	return (&Scheduler{cfg: cfg}).Limits()
}

// The context published is the one honoured: capped by the pool, and in
// static mode by the pool less the scratch blocks of the padding rows.
func TestLimitsContext(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"continuous, the model's context", Config{BlockSize: 16, NumBlocks: 64, ContextLen: 512}, 512},
		{"continuous, capped by the pool", Config{BlockSize: 16, NumBlocks: 64, ContextLen: 4096}, 64 * 16},
		{"continuous, unset: the pool", Config{BlockSize: 16, NumBlocks: 64}, 64 * 16},
		{"static, less 7 scratch blocks", Config{BlockSize: 16, NumBlocks: 64, ContextLen: 4096, Batching: BatchingStatic, BatchSize: 8}, (64 - 7) * 16},
		{"static, the model's context fits", Config{BlockSize: 16, NumBlocks: 64, ContextLen: 512, Batching: BatchingStatic, BatchSize: 8}, 512},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := limitsOf(t, tc.cfg)
			if l.ContextLen != tc.want || l.MaxPromptTokens != tc.want-1 || l.MaxTokens != tc.want {
				t.Errorf("context %d, max prompt %d, max tokens %d; want %d, %d, %d",
					l.ContextLen, l.MaxPromptTokens, l.MaxTokens, tc.want, tc.want-1, tc.want)
			}
			// Submit's check honours exactly that: the longest prompt passes,
			// one more token is refused with the field and the bound.
			if err := l.check(Request{Prompt: make([]int32, l.MaxPromptTokens), MaxTokens: 1}); err != nil {
				t.Errorf("prompt of %d tokens: %v", l.MaxPromptTokens, err)
			}
			err := l.check(Request{Prompt: make([]int32, l.ContextLen), MaxTokens: 1})
			var le *LimitError
			if !errors.As(err, &le) || !errors.Is(err, ErrPromptTooLong) {
				t.Fatalf("prompt of %d tokens: %v, want a LimitError wrapping ErrPromptTooLong", l.ContextLen, err)
			}
			if diff := cmp.Diff(LimitError{Field: "prompt", What: "prompt tokens", Op: "<=", Limit: tc.want - 1, Got: tc.want, Err: ErrPromptTooLong}, *le, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("LimitError (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLimitsDefaults(t *testing.T) {
	got := limitsOf(t, Config{BlockSize: 16, NumBlocks: 64, VocabSize: 100})
	want := Limits{
		ContextLen: 1024, MaxPromptTokens: 1023, MaxTokens: 1024, DefaultMaxTokens: DefaultMaxTokens,
		MaxStopStrings: MaxStopStrings, MaxStopStringBytes: MaxStopStringBytes, MaxStopTokenIDs: MaxStopTokenIDs,
		MaxTopLogprobs: sample.MaxTopLogprobs, VocabSize: 100, MaxSeqs: DefaultMaxSeqs, MaxWaiting: DefaultMaxWaiting,
		MaxEmbedTokens: 1024, Pooling: DefaultPooling,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Limits (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ prompt, want int }{{1, DefaultMaxTokens}, {1000, 24}, {1023, 1}} {
		if got := got.MaxTokensFor(tc.prompt); got != tc.want {
			t.Errorf("MaxTokensFor(%d) = %d, want %d", tc.prompt, got, tc.want)
		}
	}
}

// Every bound Submit checks comes back as the field, the bound and the
// value, wrapping the sentinel a caller switches on.
func TestLimitErrors(t *testing.T) {
	l := limitsOf(t, Config{BlockSize: 4, NumBlocks: 16, ContextLen: 32, VocabSize: 50})
	ok := func(f func(*Request)) Request {
		r := Request{Prompt: []int32{1, 2, 3}, MaxTokens: 4}
		f(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		req  Request
		want *LimitError // nil: a *sample.ParamError
		is   error
	}{
		{"empty prompt", Request{MaxTokens: 1}, &LimitError{Field: "prompt", Op: ">=", Limit: 1, Got: 0}, ErrEmptyPrompt},
		{"prompt id", ok(func(r *Request) { r.Prompt = []int32{1, 50} }), &LimitError{Field: "prompt", Op: "<", Limit: 50, Got: 50}, ErrTokenOutOfRange},
		{"negative prompt id", ok(func(r *Request) { r.Prompt = []int32{-1} }), &LimitError{Field: "prompt", Op: "<", Limit: 50, Got: -1}, ErrTokenOutOfRange},
		{"prompt fills the context", ok(func(r *Request) { r.Prompt = make([]int32, 32) }), &LimitError{Field: "prompt", Op: "<=", Limit: 31, Got: 32}, ErrPromptTooLong},
		{"zero max tokens", ok(func(r *Request) { r.MaxTokens = 0 }), &LimitError{Field: "max_tokens", Op: ">=", Limit: 1, Got: 0}, ErrInvalidRequest},
		{"max tokens over the context", ok(func(r *Request) { r.MaxTokens = 33 }), &LimitError{Field: "max_tokens", Op: "<=", Limit: 32, Got: 33}, ErrInvalidRequest},
		{"negative min tokens", ok(func(r *Request) { r.MinTokens = -1 }), &LimitError{Field: "min_tokens", Op: ">=", Limit: 0, Got: -1}, ErrInvalidRequest},
		{"min over max tokens", ok(func(r *Request) { r.MinTokens = 5 }), &LimitError{Field: "min_tokens", Op: "<=", Limit: 4, Got: 5}, ErrInvalidRequest},
		{"17 stop strings", ok(func(r *Request) { r.StopStrings = make([]string, 17) }), &LimitError{Field: "stop", Op: "<=", Limit: 16, Got: 17}, ErrInvalidRequest},
		{"empty stop string", ok(func(r *Request) { r.StopStrings = []string{""} }), &LimitError{Field: "stop", Op: ">=", Limit: 1, Got: 0}, ErrInvalidRequest},
		{"long stop string", ok(func(r *Request) { r.StopStrings = []string{strings.Repeat("s", 257)} }), &LimitError{Field: "stop", Op: "<=", Limit: 256, Got: 257}, ErrInvalidRequest},
		{"65 stop ids", ok(func(r *Request) { r.StopTokenIDs = make([]int32, 65) }), &LimitError{Field: "stop_token_ids", Op: "<=", Limit: 64, Got: 65}, ErrInvalidRequest},
		{"stop id", ok(func(r *Request) { r.StopTokenIDs = []int32{50} }), &LimitError{Field: "stop_token_ids", Op: "<", Limit: 50, Got: 50}, ErrTokenOutOfRange},
		{"top_p 7", ok(func(r *Request) { r.Sampling.TopP = 7 }), nil, ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := l.check(tc.req)
			if !errors.Is(err, tc.is) {
				t.Fatalf("%v does not wrap %v", err, tc.is)
			}
			if tc.want == nil {
				var pe *sample.ParamError
				if !errors.As(err, &pe) || pe.Field != "top_p" {
					t.Errorf("%v: want a sample.ParamError for top_p", err)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("%v is no LimitError", err)
			}
			got := *le
			got.What, got.Err = "", nil
			if diff := cmp.Diff(*tc.want, got); diff != "" {
				t.Errorf("LimitError (-want +got):\n%s", diff)
			}
		})
	}
	if err := l.check(ok(func(*Request) {})); err != nil {
		t.Errorf("a good request: %v", err)
	}
}
