package server

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/scheduler"
	"github.com/weft-inference/weft/scheduler/schedtest"
)

const embedWidth = 8

func embedHarness(t *testing.T, hidden int) *harness {
	return newHarness(t, harnessOpts{
		sched: func(c *scheduler.Config) { c.Pooling, c.ContextLen = batch.PoolMean, 100 },
		model: func(m *schedtest.Model) { m.Hidden = hidden },
	})
}

func textInput(s string) *inferencev1.EmbedInput {
	return &inferencev1.EmbedInput{Input: &inferencev1.EmbedInput_Text{Text: s}}
}

func idsInput(ids ...int32) *inferencev1.EmbedInput {
	return &inferencev1.EmbedInput{Input: &inferencev1.EmbedInput_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: ids}}}
}

// TestEmbed: text and token-id inputs get the pooled vectors of their
// tokens (text with BOS), in order, with their token counts; GetModelInfo
// reports the vectors' length and the pooling.
func TestEmbed(t *testing.T) {
	h := embedHarness(t, embedWidth)
	ctx := context.Background()
	got, err := h.client.Embed(ctx, &inferencev1.EmbedRequest{RequestId: "e1", Dimensions: embedWidth,
		Inputs: []*inferencev1.EmbedInput{textInput("hello"), idsInput(40, 41, 42), textInput("a cat")}})
	if err != nil {
		t.Fatal(err)
	}
	want := &inferencev1.EmbedResponse{Pooling: inferencev1.Pooling_POOLING_MEAN}
	for _, ids := range [][]int32{fakeTokenizer{}.Encode("hello", true, false), {40, 41, 42}, fakeTokenizer{}.Encode("a cat", true, false)} {
		want.Embeddings = append(want.Embeddings, &inferencev1.Embedding{
			Values: schedtest.ReferenceEmbedding(ids, embedWidth, batch.PoolMean), PromptTokens: int32(len(ids))})
		want.PromptTokens += int32(len(ids))
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("Embed (-want +got):\n%s", diff)
	}
	info, err := h.client.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetEmbeddingDimensions() != embedWidth || info.GetPooling() != inferencev1.Pooling_POOLING_MEAN {
		t.Errorf("GetModelInfo: embedding_dimensions %d, pooling %v", info.GetEmbeddingDimensions(), info.GetPooling())
	}
}

func TestEmbedRefused(t *testing.T) {
	h := embedHarness(t, embedWidth)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		req    *inferencev1.EmbedRequest
		code   codes.Code
		reason string
		meta   map[string]string
	}{
		{"no input", &inferencev1.EmbedRequest{}, codes.InvalidArgument, ReasonInvalidParameter,
			map[string]string{"field": "inputs", "op": ">=", "limit": "1", "value": "0"}},
		{"dimensions", &inferencev1.EmbedRequest{Inputs: []*inferencev1.EmbedInput{textInput("a")}, Dimensions: 4}, codes.InvalidArgument, ReasonInvalidParameter,
			map[string]string{"field": "dimensions", "value": "4", "embedding_dimensions": "8"}},
		{"negative dimensions", &inferencev1.EmbedRequest{Inputs: []*inferencev1.EmbedInput{textInput("a")}, Dimensions: -1}, codes.InvalidArgument, ReasonInvalidParameter,
			map[string]string{"field": "dimensions"}},
		{"unset input", &inferencev1.EmbedRequest{Inputs: []*inferencev1.EmbedInput{textInput("a"), {}}}, codes.InvalidArgument, ReasonEmptyPrompt,
			map[string]string{"field": "inputs[1]"}},
		{"empty text", &inferencev1.EmbedRequest{Inputs: []*inferencev1.EmbedInput{textInput("")}}, codes.InvalidArgument, ReasonEmptyPrompt,
			map[string]string{"field": "inputs[0].text"}},
		{"empty ids", &inferencev1.EmbedRequest{Inputs: []*inferencev1.EmbedInput{idsInput()}}, codes.InvalidArgument, ReasonEmptyPrompt,
			map[string]string{"field": "inputs[0]", "op": ">=", "limit": "1", "value": "0"}},
		{"invalid UTF-8", &inferencev1.EmbedRequest{Inputs: []*inferencev1.EmbedInput{textInput("a\xff")}}, codes.InvalidArgument, ReasonInvalidUTF8,
			map[string]string{"field": "inputs[0].text"}},
		{"over the context", &inferencev1.EmbedRequest{Inputs: []*inferencev1.EmbedInput{idsInput(5), idsInput(make([]int32, 101)...)}}, codes.InvalidArgument, ReasonPromptTooLong,
			map[string]string{"field": "inputs[1]", "op": "<=", "limit": "100", "value": "101", "prompt_tokens": "101", "context_length": "100"}},
		{"id outside the vocabulary", &inferencev1.EmbedRequest{Inputs: []*inferencev1.EmbedInput{idsInput(fakeVocab)}}, codes.InvalidArgument, ReasonTokenOutOfRange,
			map[string]string{"field": "inputs[0]", "op": "<", "limit": "259", "value": "259"}},
	} {
		_, err := h.client.Embed(ctx, tc.req)
		code, reason := errorInfo(t, err)
		if code != tc.code || reason != tc.reason {
			t.Errorf("%s: %v %s (%v), want %v %s", tc.name, code, reason, err, tc.code, tc.reason)
			continue
		}
		for _, d := range status.Convert(err).Details() {
			if ei, ok := d.(*errdetails.ErrorInfo); ok {
				if diff := cmp.Diff(tc.meta, ei.GetMetadata()); diff != "" {
					t.Errorf("%s: metadata (-want +got):\n%s", tc.name, diff)
				}
			}
		}
	}

	none := embedHarness(t, 0)
	_, err := none.client.Embed(ctx, &inferencev1.EmbedRequest{Inputs: []*inferencev1.EmbedInput{textInput("a")}})
	if code, reason := errorInfo(t, err); code != codes.FailedPrecondition || reason != ReasonNoEmbeddings {
		t.Errorf("a model without hidden states: %v %s (%v), want FAILED_PRECONDITION NO_EMBEDDINGS", code, reason, err)
	}
	info, err := none.client.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{})
	if err != nil || info.GetEmbeddingDimensions() != 0 || info.GetPooling() != inferencev1.Pooling_POOLING_UNSPECIFIED {
		t.Errorf("GetModelInfo without embeddings: %v, %v", info, err)
	}
}
