package scheduler

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// tok is the token the letters decoder shows as c (never 0, the fake EOS).
func tok(c byte) int32 { return 26 + int32(c-'a') }

// scripted makes the fake generate script after a 3-token prompt ('.' is
// EOS), then 'z' forever.
func scripted(script string) func([]int32) int32 {
	return func(h []int32) int32 {
		i := len(h) - 3
		if i >= len(script) {
			return tok('z')
		}
		if script[i] == '.' {
			return 0
		}
		return tok(script[i])
	}
}

func TestStopConditions(t *testing.T) {
	for _, tc := range []struct {
		name       string
		script     string
		req        Request
		contextLen int
		want       Final
		wantText   string
		wantTokens int
	}{
		{name: "max tokens", script: "helloxworld", req: Request{MaxTokens: 4},
			want: Final{Reason: FinishLength}, wantText: "hell", wantTokens: 4},
		{name: "context length", script: "helloxworld", req: Request{MaxTokens: 8}, contextLen: 8,
			want: Final{Reason: FinishLength}, wantText: "hello", wantTokens: 5},
		{name: "eos", script: "hi.there", req: Request{MaxTokens: 20},
			want: Final{Reason: FinishEOS}, wantText: "hi", wantTokens: 3},
		{name: "ignore eos", script: "hi.there", req: Request{MaxTokens: 5, IgnoreEOS: true},
			want: Final{Reason: FinishLength}, wantText: "hiath", wantTokens: 5},
		{name: "min tokens suppress eos", script: "hi.the.re", req: Request{MaxTokens: 20, MinTokens: 3},
			want: Final{Reason: FinishEOS}, wantText: "hiathe", wantTokens: 7},
		{name: "eos allowed right after min tokens", script: "hi.the", req: Request{MaxTokens: 20, MinTokens: 2},
			want: Final{Reason: FinishEOS}, wantText: "hi", wantTokens: 3},
		{name: "stop string", script: "helloxworld", req: Request{MaxTokens: 20, StopStrings: []string{"loxw"}},
			want: Final{Reason: FinishStopSequence, StopMatched: "loxw"}, wantText: "hel", wantTokens: 7},
		{name: "stop string included", script: "helloxworld", req: Request{MaxTokens: 20, StopStrings: []string{"loxw"}, IncludeStopString: true},
			want: Final{Reason: FinishStopSequence, StopMatched: "loxw"}, wantText: "helloxw", wantTokens: 7},
		{name: "earliest stop string wins", script: "helloxworld", req: Request{MaxTokens: 20, StopStrings: []string{"wor", "ox"}},
			want: Final{Reason: FinishStopSequence, StopMatched: "ox"}, wantText: "hell", wantTokens: 6},
		{name: "near miss released", script: "helloxworld", req: Request{MaxTokens: 11, StopStrings: []string{"lz", "worx"}},
			want: Final{Reason: FinishLength}, wantText: "helloxworld", wantTokens: 11},
		{name: "stop string suppressed by min tokens", script: "abcabcabd", req: Request{MaxTokens: 20, MinTokens: 4, StopStrings: []string{"ab"}},
			want: Final{Reason: FinishStopSequence, StopMatched: "ab"}, wantText: "abcabc", wantTokens: 8},
		{name: "stop token id", script: "helloxworld", req: Request{MaxTokens: 20, StopTokenIDs: []int32{tok('x')}},
			want: Final{Reason: FinishStopSequence, StopMatched: "x"}, wantText: "hello", wantTokens: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := testConfig()
				cfg.ContextLen = tc.contextLen
				h := startHarness(t, cfg, func(m *fakeModel) { m.next = scripted(tc.script) })
				req := tc.req
				req.Prompt = []int32{1, 2, 3}
				r := h.collect(h.submit(req))
				if r.final == nil {
					t.Fatalf("no final: %v", r.err)
				}
				got := Final{Reason: r.final.Reason, StopMatched: r.final.StopMatched}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("final (-want +got):\n%s", diff)
				}
				if r.text != tc.wantText || len(r.tokens) != tc.wantTokens || r.final.CompletionTokens != tc.wantTokens {
					t.Errorf("text %q with %d tokens (final %d), want %q with %d", r.text, len(r.tokens), r.final.CompletionTokens, tc.wantText, tc.wantTokens)
				}
				h.stop()
			})
		})
	}
}

// Text that may still become a stop string is held back until it cannot.
func TestHoldBack(t *testing.T) {
	for _, tc := range []struct {
		buf   string
		stops []string
		want  int
	}{
		{"hello", []string{"lo!"}, 2},
		{"hello", []string{"xyz"}, 0},
		{"hello", []string{"o", "llo!"}, 3},
		{"hel", []string{"hello"}, 3},
		{"", []string{"a"}, 0},
		{"日本", []string{"本語"}, len("本")},
	} {
		if got := holdBack(tc.buf, tc.stops); got != tc.want {
			t.Errorf("holdBack(%q, %q) = %d, want %d", tc.buf, tc.stops, got, tc.want)
		}
	}
}

// A slow reader gets everything pending merged into one event.
func TestRecvMerges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testConfig(), nil)
		p := prompt(3, 5)
		st := h.submit(Request{Prompt: p, MaxTokens: 12, IgnoreEOS: true})
		time.Sleep(20 * stepDur) // the reader is away while the whole answer is made
		r := h.collect(st)
		if r.events != 1 {
			t.Errorf("%d events, want 1 merged", r.events)
		}
		if diff := cmp.Diff(reference(p, 12, nil), r.tokens); diff != "" {
			t.Errorf("tokens (-want +got):\n%s", diff)
		}
		h.stop()
	})
}
