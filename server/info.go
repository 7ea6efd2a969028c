package server

import (
	"context"
	"sort"
	"unicode/utf8"

	"google.golang.org/grpc/codes"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
)

// Tokenize implements InferenceService.Tokenize.
func (s *Server) Tokenize(ctx context.Context, req *inferencev1.TokenizeRequest) (*inferencev1.TokenizeResponse, error) {
	if !utf8.ValidString(req.GetText()) {
		return nil, s.refuse(reqErr(codes.InvalidArgument, ReasonInvalidUTF8, "text", "not valid UTF-8"))
	}
	if err := s.door.CheckPromptBytes("text", len(req.GetText())); err != nil {
		return nil, s.refuse(err)
	}
	ids, err := s.door.Encode(ctx, req.GetText(), req.GetAddSpecialTokens(), req.GetParseSpecial())
	if err != nil {
		return nil, s.refuse(err)
	}
	return &inferencev1.TokenizeResponse{TokenIds: ids}, nil
}

// Detokenize implements InferenceService.Detokenize.
func (s *Server) Detokenize(_ context.Context, req *inferencev1.DetokenizeRequest) (*inferencev1.DetokenizeResponse, error) {
	for _, t := range req.GetTokenIds() {
		if t < 0 || int(t) >= s.cfg.Info.VocabSize {
			return nil, Status(reqErr(codes.InvalidArgument, ReasonTokenOutOfRange, "token_ids",
				"token id %d outside the vocabulary [0, %d)", t, s.cfg.Info.VocabSize))
		}
	}
	return &inferencev1.DetokenizeResponse{Text: s.cfg.Tokenizer.Decode(req.GetTokenIds())}, nil
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
