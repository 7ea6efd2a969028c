// Package benchtest provides an in-process fake InferenceService for
// testing the load generator and `weft bench` without a model.
package benchtest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Server is a fake InferenceService over a vocabulary of VocabSize ids:
// 0 <unk>, 1 BOS, 2 EOS (end of generation), 3..10 control bytes (they
// decode to text a prompt should not contain), and from 11 on the words
// " w11", " w12", ... that tokenize back to their id. Generate streams
// max_tokens tokens in chunks of ChunkSize, then a final message (finish
// reason length, or EOS when ShortBy cut the output short).
type Server struct {
	inferencev1.UnimplementedInferenceServiceServer

	// ChunkSize is the number of tokens per chunk (default 1).
	ChunkSize int
	// ChunkDelay is slept before each chunk.
	ChunkDelay time.Duration
	// Fail holds request ids answered with an Unavailable status after
	// their first chunk.
	Fail map[string]bool
	// ShortBy makes every request return this many tokens fewer than asked.
	ShortBy int
	// TokenAt, when set, is Generate's i-th output token for a prompt of
	// token ids (an id in 11..VocabSize-1); nil: 11 + i mod (VocabSize-11),
	// whatever the prompt.
	TokenAt func(prompt []int32, i int) int32

	mu    sync.Mutex
	reqs  []*inferencev1.GenerateRequest
	turns []*inferencev1.ChatTurn
}

// VocabSize is the fake model's vocabulary size.
const VocabSize = 64

// ContextLength is the fake model's context length.
const ContextLength = 512

// Requests returns the Generate requests received so far.
func (s *Server) Requests() []*inferencev1.GenerateRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*inferencev1.GenerateRequest(nil), s.reqs...)
}

// Turns returns the Chat turns received so far.
func (s *Server) Turns() []*inferencev1.ChatTurn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*inferencev1.ChatTurn(nil), s.turns...)
}

// Chat answers one turn per stream, as Generate answers a text prompt of
// one token per word: max_tokens tokens less ShortBy, then a Final whose
// finish reason is TOOL_CALLS when the turn forces a call (tool choice
// REQUIRED), else as Generate's.
func (s *Server) Chat(st grpc.BidiStreamingServer[inferencev1.ChatRequest, inferencev1.ChatResponse]) error {
	m, err := st.Recv()
	if err != nil {
		return err
	}
	turn := m.GetTurn()
	s.mu.Lock()
	s.turns = append(s.turns, turn)
	s.mu.Unlock()
	if len(turn.GetMessages()) == 0 {
		return status.Error(codes.InvalidArgument, "empty turn")
	}
	n := int(turn.GetStopping().GetMaxTokens())
	if n == 0 {
		n = 16
	}
	n = max(1, n-s.ShortBy)
	for i := range n {
		id := int32(11 + i%(VocabSize-11))
		if err := st.Send(&inferencev1.ChatResponse{Response: &inferencev1.ChatResponse_Chunk{
			Chunk: &inferencev1.Chunk{TokenIds: []int32{id}, Text: piece(id)}}}); err != nil {
			return err
		}
	}
	finish := inferencev1.FinishReason_FINISH_REASON_LENGTH
	switch {
	case turn.GetToolChoice().GetMode() == inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED:
		finish = inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS
	case s.ShortBy > 0:
		finish = inferencev1.FinishReason_FINISH_REASON_EOS
	}
	words := len(strings.Fields(turn.GetMessages()[0].GetContent()))
	return st.Send(&inferencev1.ChatResponse{Response: &inferencev1.ChatResponse_Final{Final: &inferencev1.Final{
		FinishReason: finish,
		Usage:        &inferencev1.Usage{PromptTokens: int32(words), CompletionTokens: int32(n)},
		Timings:      &inferencev1.Timings{QueueWait: durationpb.New(0), TimeToFirstToken: durationpb.New(0), Total: durationpb.New(0)},
		RequestId:    turn.GetRequestId(),
	}}})
}

// Serve starts s on a loopback port and returns its address; the server
// stops when the test ends.
func Serve(t testing.TB, s *Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	inferencev1.RegisterInferenceServiceServer(gs, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return lis.Addr().String()
}

func (s *Server) GetModelInfo(context.Context, *inferencev1.GetModelInfoRequest) (*inferencev1.GetModelInfoResponse, error) {
	return &inferencev1.GetModelInfoResponse{
		Name: "fake", Architecture: "llama", ContextLength: ContextLength, VocabSize: VocabSize,
		BosTokenId: 1, EogTokenIds: []int32{2},
	}, nil
}

func piece(id int32) string {
	switch {
	case id == 0:
		return "<unk>"
	case id == 1:
		return "<s>"
	case id == 2:
		return "</s>"
	case id <= 10:
		return string(rune(id)) // control character
	}
	return " w" + strconv.Itoa(int(id))
}

func (s *Server) Detokenize(_ context.Context, r *inferencev1.DetokenizeRequest) (*inferencev1.DetokenizeResponse, error) {
	var b strings.Builder
	for _, id := range r.GetTokenIds() {
		if id < 0 || id >= VocabSize {
			return nil, status.Errorf(codes.InvalidArgument, "token id %d out of range", id)
		}
		if id > 2 {
			b.WriteString(piece(id))
		}
	}
	return &inferencev1.DetokenizeResponse{Text: b.String()}, nil
}

// Tokenize maps " wN" and "wN" words to N and every other byte to id 0.
func (s *Server) Tokenize(_ context.Context, r *inferencev1.TokenizeRequest) (*inferencev1.TokenizeResponse, error) {
	var ids []int32
	for _, f := range strings.Fields(r.GetText()) {
		if n, err := strconv.Atoi(strings.TrimPrefix(f, "w")); err == nil && strings.HasPrefix(f, "w") && n > 10 && n < VocabSize {
			ids = append(ids, int32(n))
			continue
		}
		for range len(f) {
			ids = append(ids, 0)
		}
	}
	return &inferencev1.TokenizeResponse{TokenIds: ids}, nil
}

func (s *Server) Generate(r *inferencev1.GenerateRequest, st grpc.ServerStreamingServer[inferencev1.GenerateResponse]) error {
	arrived := time.Now()
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	s.mu.Unlock()
	prompt := r.GetTokenIds().GetIds()
	if len(prompt) == 0 {
		return status.Error(codes.InvalidArgument, "empty prompt")
	}
	for _, id := range prompt {
		if id < 0 || id >= VocabSize {
			return status.Errorf(codes.InvalidArgument, "prompt token %d out of range", id)
		}
	}
	n := int(r.GetStopping().GetMaxTokens())
	if n == 0 {
		n = 16
	}
	n = max(1, n-s.ShortBy)
	if len(prompt)+n > ContextLength {
		return status.Errorf(codes.InvalidArgument, "prompt %d + max_tokens %d exceed the context", len(prompt), n)
	}
	size := max(1, s.ChunkSize)
	var ttft time.Duration
	for sent := 0; sent < n; {
		k := min(size, n-sent)
		ids := make([]int32, k)
		var text strings.Builder
		for i := range ids {
			ids[i] = int32(11 + (sent+i)%(VocabSize-11))
			if s.TokenAt != nil {
				ids[i] = s.TokenAt(prompt, sent+i)
			}
			text.WriteString(piece(ids[i]))
		}
		if s.ChunkDelay > 0 {
			select {
			case <-time.After(s.ChunkDelay):
			case <-st.Context().Done():
				return st.Context().Err()
			}
		}
		if sent == 0 {
			ttft = time.Since(arrived)
		}
		if err := st.Send(&inferencev1.GenerateResponse{Response: &inferencev1.GenerateResponse_Chunk{
			Chunk: &inferencev1.Chunk{TokenIds: ids, Text: text.String()}}}); err != nil {
			return err
		}
		sent += k
		if s.Fail[r.GetRequestId()] {
			return status.Error(codes.Unavailable, fmt.Sprintf("injected failure for %s", r.GetRequestId()))
		}
	}
	finish := inferencev1.FinishReason_FINISH_REASON_LENGTH
	if s.ShortBy > 0 {
		finish = inferencev1.FinishReason_FINISH_REASON_EOS
	}
	return st.Send(&inferencev1.GenerateResponse{Response: &inferencev1.GenerateResponse_Final{Final: &inferencev1.Final{
		FinishReason: finish,
		Usage:        &inferencev1.Usage{PromptTokens: int32(len(prompt)), CompletionTokens: int32(n)},
		Timings: &inferencev1.Timings{
			QueueWait:        durationpb.New(time.Millisecond),
			TimeToFirstToken: durationpb.New(ttft),
			Total:            durationpb.New(time.Since(arrived)),
		},
		RequestId: r.GetRequestId(),
	}}})
}
