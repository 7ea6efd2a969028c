package server

import (
	"context"
	"sort"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
)

// Tokenize implements InferenceService.Tokenize (the Door's Tokenize, as
// every door's tokenize endpoint).
func (s *Server) Tokenize(ctx context.Context, req *inferencev1.TokenizeRequest) (*inferencev1.TokenizeResponse, error) {
	ids, err := s.door.Tokenize(ctx, "text", req.GetText(), req.GetAddSpecialTokens(), req.GetParseSpecial())
	if err != nil {
		return nil, s.refuse(err)
	}
	return &inferencev1.TokenizeResponse{TokenIds: ids}, nil
}

// Detokenize implements InferenceService.Detokenize (the Door's
// Detokenize).
func (s *Server) Detokenize(_ context.Context, req *inferencev1.DetokenizeRequest) (*inferencev1.DetokenizeResponse, error) {
	text, err := s.door.Detokenize("token_ids", req.GetTokenIds())
	if err != nil {
		return nil, Status(err)
	}
	return &inferencev1.DetokenizeResponse{Text: text}, nil
}

// GetModelInfo implements InferenceService.GetModelInfo. The context
// length is the scheduler's (Limits.ContextLen: what Submit honours in the
// configured batching mode); has_chat_template is set only when Chat
// renders with the model's own template, not an operator's fallback.
func (s *Server) GetModelInfo(context.Context, *inferencev1.GetModelInfoRequest) (*inferencev1.GetModelInfoResponse, error) {
	in := s.cfg.Info
	out := &inferencev1.GetModelInfoResponse{
		Name:            in.Name,
		Architecture:    in.Architecture,
		ContextLength:   int32(s.door.Limits().ContextLen),
		VocabSize:       int32(in.VocabSize),
		Backend:         in.Backend,
		BosTokenId:      in.BOS,
		EogTokenIds:     in.EOG,
		HasChatTemplate: s.door.HasChat() && s.cfg.ChatFallback == "",
		ParameterCount:  in.ParameterCount,
		KvCache: &inferencev1.KVCacheInfo{
			BlockSize:      int32(in.KV.BlockSize),
			NumBlocks:      int32(in.KV.NumBlocks),
			CapacityTokens: int64(in.KV.BlockSize) * int64(in.KV.NumBlocks),
			BytesPerBlock:  in.KV.BytesPerBlock,
			Type:           in.KV.Type,
		},
	}
	if l := s.door.Limits(); l.EmbedDim > 0 {
		out.EmbeddingDimensions, out.Pooling = int32(l.EmbedDim), poolings[l.Pooling]
	}
	for t, n := range in.TensorTypes {
		out.TensorTypes = append(out.TensorTypes, &inferencev1.TensorTypeCount{Type: t, Count: int32(n)})
	}
	sort.Slice(out.TensorTypes, func(i, j int) bool { return out.TensorTypes[i].Type < out.TensorTypes[j].Type })
	return out, nil
}
