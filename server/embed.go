package server

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/batch"
)

// poolings is the wire value of each pooling.
var poolings = map[batch.Pooling]inferencev1.Pooling{
	batch.PoolMean: inferencev1.Pooling_POOLING_MEAN,
	batch.PoolLast: inferencev1.Pooling_POOLING_LAST,
	batch.PoolCLS:  inferencev1.Pooling_POOLING_CLS,
}

// Embed implements InferenceService.Embed: the wire shape is checked here
// (UTF-8, an input set), everything else is the Door's Embed.
func (s *Server) Embed(ctx context.Context, req *inferencev1.EmbedRequest) (*inferencev1.EmbedResponse, error) {
	start := time.Now()
	if !utf8.ValidString(req.GetRequestId()) {
		return nil, s.refuse(reqErr(codes.InvalidArgument, ReasonInvalidUTF8, "request_id", "not valid UTF-8"))
	}
	if req.GetDimensions() < 0 {
		return nil, s.refuse(badField("dimensions", "%d must be >= 0 (0: the model's)", req.GetDimensions()))
	}
	inputs := make([]frontdoor.EmbedInput, len(req.GetInputs()))
	for i, in := range req.GetInputs() {
		switch x := in.GetInput().(type) {
		case *inferencev1.EmbedInput_Text:
			if !utf8.ValidString(x.Text) {
				return nil, s.refuse(reqErr(codes.InvalidArgument, ReasonInvalidUTF8, fmt.Sprintf("inputs[%d].text", i), "not valid UTF-8"))
			}
			inputs[i] = frontdoor.EmbedInput{Text: x.Text}
		case *inferencev1.EmbedInput_TokenIds:
			inputs[i] = frontdoor.EmbedInput{Tokens: true, IDs: x.TokenIds.GetIds()}
		default:
			return nil, s.refuse(reqErr(codes.InvalidArgument, ReasonEmptyPrompt, fmt.Sprintf("inputs[%d]", i), "neither text nor token_ids"))
		}
	}
	res, err := s.door.Embed(ctx, s.cfg.Scheduler, frontdoor.EmbedRequest{
		Door: frontdoor.DoorGRPC, Start: start, ID: req.GetRequestId(), Inputs: inputs,
		Dimensions: int(req.GetDimensions()), Priority: int(req.GetPriority()),
	})
	if err != nil {
		return nil, s.refuse(err)
	}
	out := &inferencev1.EmbedResponse{
		Embeddings:   make([]*inferencev1.Embedding, len(res.Vectors)),
		PromptTokens: int32(res.PromptTokens),
		Pooling:      poolings[s.door.Limits().Pooling],
	}
	for i, v := range res.Vectors {
		out.Embeddings[i] = &inferencev1.Embedding{Values: v, PromptTokens: int32(res.Tokens[i])}
	}
	return out, nil
}
