package server

import (
	"context"
	"io"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/scheduler"
)

// errorMeta returns the metadata of err's one ErrorInfo.
func errorMeta(err error) map[string]string {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.GetMetadata()
		}
	}
	return nil
}

func idsPrompt(n int, maxTokens int32) *inferencev1.GenerateRequest {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = 3 + 'a'
	}
	return &inferencev1.GenerateRequest{
		Prompt:   &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: ids}},
		Stopping: &inferencev1.StoppingCriteria{MaxTokens: maxTokens, IgnoreEos: true},
	}
}

// In both batching modes GetModelInfo reports the context Submit honours
// (static mode's is the pool less the padding rows' scratch blocks, below
// the 40,000 the harness asks for), the longest prompt it allows is
// served, and one token more is refused with the field and the bound in
// the ErrorInfo.
func TestContextLengthHonoured(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sched func(*scheduler.Config)
		want  int
	}{
		{"continuous", func(c *scheduler.Config) { c.NumBlocks = 64 }, 64 * 16},
		{"static", func(c *scheduler.Config) { c.NumBlocks = 64; c.Batching = scheduler.BatchingStatic; c.BatchSize = 8 }, (64 - 7) * 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{sched: tc.sched})
			ctx := context.Background()
			info, err := h.client.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if got := int(info.GetContextLength()); got != tc.want || got != h.sched.Limits().ContextLen {
				t.Errorf("GetModelInfo context_length %d, scheduler's %d, want %d", got, h.sched.Limits().ContextLen, tc.want)
			}
			if got := h.generate(ctx, idsPrompt(tc.want-1, 1)); got.err != nil || len(got.tokens) != 1 {
				t.Errorf("prompt of %d tokens: %v, %d tokens", tc.want-1, got.err, len(got.tokens))
			}
			got := h.generate(ctx, idsPrompt(tc.want, 1))
			if code, reason := errorInfo(t, got.err); code != codes.InvalidArgument || reason != ReasonPromptTooLong {
				t.Fatalf("prompt of %d tokens: %v", tc.want, got.err)
			}
			wantMeta := map[string]string{
				"field": "prompt", "op": "<=", "limit": itoa(tc.want - 1), "value": itoa(tc.want),
				"prompt_tokens": itoa(tc.want), "context_length": itoa(tc.want),
			}
			if diff := cmp.Diff(wantMeta, errorMeta(got.err)); diff != "" {
				t.Errorf("ErrorInfo metadata (-want +got):\n%s", diff)
			}
			// max_tokens is bounded by the same context.
			got = h.generate(ctx, idsPrompt(1, int32(tc.want+1)))
			if diff := cmp.Diff(map[string]string{"field": "stopping.max_tokens", "op": "<=", "limit": itoa(tc.want), "value": itoa(tc.want + 1)},
				errorMeta(got.err)); diff != "" {
				t.Errorf("max_tokens over the context: %v; metadata (-want +got):\n%s", got.err, diff)
			}
		})
	}
}

// The scheduler's and the sampler's field names reach the client as the
// proto's.
func TestLimitFieldNames(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		edit   func(*inferencev1.GenerateRequest)
		reason string
		field  string
	}{
		{"top_n", func(r *inferencev1.GenerateRequest) { r.Logprobs = &inferencev1.LogprobOptions{TopN: 21} }, ReasonInvalidParameter, "logprobs.top_n"},
		{"temperature", func(r *inferencev1.GenerateRequest) { r.Sampling = &inferencev1.SamplingParams{Temperature: 101} }, ReasonInvalidParameter, "sampling.temperature"},
		{"min_tokens", func(r *inferencev1.GenerateRequest) { r.Stopping.MinTokens = 9 }, ReasonInvalidParameter, "stopping.min_tokens"},
		{"stop strings", func(r *inferencev1.GenerateRequest) { r.Stopping.Stop = make([]string, 17) }, ReasonInvalidParameter, "stopping.stop"},
		{"stop ids", func(r *inferencev1.GenerateRequest) { r.Stopping.StopTokenIds = []int32{fakeVocab} }, ReasonTokenOutOfRange, "stopping.stop_token_ids"},
		{"prompt ids", func(r *inferencev1.GenerateRequest) { r.Prompt = idsPrompt(1, 1).Prompt; r.GetTokenIds().Ids[0] = -1 }, ReasonTokenOutOfRange, "prompt"},
		{"empty ids", func(r *inferencev1.GenerateRequest) { r.Prompt = idsPrompt(0, 1).Prompt }, ReasonEmptyPrompt, "prompt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := textPrompt("hello", 8)
			tc.edit(req)
			got := h.generate(ctx, req)
			if _, reason := errorInfo(t, got.err); reason != tc.reason || errorMeta(got.err)["field"] != tc.field {
				t.Errorf("%v: reason %q field %q, want %q %q", got.err, reason, errorMeta(got.err)["field"], tc.reason, tc.field)
			}
		})
	}
}

// Without a chat template Chat is refused with FAILED_PRECONDITION /
// NO_CHAT_TEMPLATE and GetModelInfo says so; with an operator's fallback
// Chat is served but has_chat_template stays false (it is not the
// model's).
func TestChatTemplatePolicy(t *testing.T) {
	ctx := context.Background()
	t.Run("none", func(t *testing.T) {
		h := newHarness(t, harnessOpts{door: func(c *frontdoor.Config) { c.Chat = nil }})
		info, err := h.client.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{})
		if err != nil || info.GetHasChatTemplate() {
			t.Errorf("GetModelInfo: has_chat_template %v, %v; want false", info.GetHasChatTemplate(), err)
		}
		s, err := h.client.Chat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The server may have ended the stream before the turn arrives
		// (Send then says io.EOF); Recv has the status.
		if err := s.Send(chatTurn(&inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{user("hi")}})); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		_, err = s.Recv()
		if code, reason := errorInfo(t, err); code != codes.FailedPrecondition || reason != ReasonNoChatTemplate {
			t.Errorf("Chat without a template: %v", err)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		tmpl, err := chat.Fallback("chatml")
		if err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, harnessOpts{
			door:   func(c *frontdoor.Config) { c.Chat = tmpl },
			server: func(c *Config) { c.ChatFallback = "chatml" },
		})
		info, err := h.client.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{})
		if err != nil || info.GetHasChatTemplate() {
			t.Errorf("GetModelInfo: has_chat_template %v, %v; want false", info.GetHasChatTemplate(), err)
		}
		if m := chatOnce(t, h, user("hi")); m.GetFinal() == nil {
			t.Errorf("Chat with the fallback: %v", m)
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }
