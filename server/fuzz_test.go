package server

import (
	"context"
	"errors"
	"io"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/scheduler"
)

// fuzzMaxTokens caps what one fuzzed request generates, to keep each input
// fast (the fuzzer's interest is in the validation and the plumbing, not in
// long generations).
const fuzzMaxTokens = 4

// realClient serves stories260K on the CPU runtime over bufconn and returns
// a client; everything stops at cleanup.
func realClient(tb testing.TB) inferencev1.InferenceServiceClient {
	tb.Helper()
	return realClientWith(tb, frontdoor.Config{Chat: chat.Default()})
}

// realClientWith is realClient with the Door of dcfg (its Tokenizer and
// Limits set here).
func realClientWith(tb testing.TB, dcfg frontdoor.Config) inferencev1.InferenceServiceClient {
	tb.Helper()
	m, err := runtime.Load(shareddata.Path(tb, "models/stories260K.gguf"))
	if err != nil {
		tb.Fatal(err)
	}
	b, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: "f32", NumBlocks: 256})
	if err != nil {
		m.Close()
		tb.Fatal(err)
	}
	kv := b.KV()
	sched, err := scheduler.New(scheduler.Config{
		BlockSize:  kv.BlockSize,
		NumBlocks:  kv.NumBlocks,
		MaxSeqs:    8,
		MaxWaiting: 16,
		ContextLen: min(m.HP.ContextLen, kv.NumBlocks*kv.BlockSize),
		NewDecoder: func() scheduler.TextDecoder { return m.Tok.NewStreamDecoder() },
		IsEOG:      m.Tok.IsEOG,
		VocabSize:  m.HP.VocabSize,

		DefaultMaxTokens: fuzzMaxTokens,
	}, runtime.NewEngine(b, m.HP.VocabSize))
	if err != nil {
		b.Close()
		m.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close(); m.Close() }) // after the step loop has ended (serveOverBufconn)
	dcfg.Tokenizer = m.Tok
	return serveOverBufconn(tb, sched, dcfg,
		Config{Tokenizer: m.Tok, Info: ModelInfo{Name: m.Name, VocabSize: m.HP.VocabSize}})
}

// checkStatus fails unless err is nil or a status with exactly one
// ErrorInfo of weft's domain and not INTERNAL (a recovered panic).
func checkStatus(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || errors.Is(err, io.EOF) {
		return
	}
	st := status.Convert(err)
	n := 0
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			n++
			if ei.GetDomain() != ErrorDomain || ei.GetReason() == "" {
				t.Errorf("%s: ErrorInfo %v", what, ei)
			}
		}
	}
	if n != 1 || st.Code() == codes.Internal {
		t.Errorf("%s: %v with %d ErrorInfos", what, err, n)
	}
}

// capTokens keeps a fuzzed request's generation short.
func capTokens(st *inferencev1.StoppingCriteria) {
	if st != nil && (st.MaxTokens > fuzzMaxTokens || st.MaxTokens < 0) {
		st.MaxTokens = fuzzMaxTokens
	}
	if st != nil && st.MinTokens > fuzzMaxTokens {
		st.MinTokens = 0
	}
}

// FuzzAPI feeds arbitrary GenerateRequest and ChatRequest messages (the
// fuzz bytes decoded with proto.Unmarshal) to an in-process server on the
// real stories260K model: no panic (INTERNAL), every error with exactly one
// ErrorInfo, every refused chat turn a TurnError with a reason.
//
//	go test -run '^$' -fuzz FuzzAPI -fuzztime 2m ./server
func FuzzAPI(f *testing.F) {
	seed := func(chat bool, m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(chat, b)
	}
	seed(false, &inferencev1.GenerateRequest{Prompt: &inferencev1.GenerateRequest_Text{Text: "Once upon a time"}})
	seed(false, &inferencev1.GenerateRequest{Prompt: &inferencev1.GenerateRequest_Text{Text: "a</s>b"}, ParseSpecial: true,
		Sampling: &inferencev1.SamplingParams{Temperature: 0.8, TopP: 0.9, TopK: 5}, Logprobs: &inferencev1.LogprobOptions{TopN: 3},
		Stopping: &inferencev1.StoppingCriteria{MaxTokens: 3, Stop: []string{"."}, StopTokenIds: []int32{2}}})
	seed(false, &inferencev1.GenerateRequest{Prompt: &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: []int32{1, 403, 9999}}}})
	seed(false, &inferencev1.GenerateRequest{Sampling: &inferencev1.SamplingParams{TopP: 7}})
	seed(true, &inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: &inferencev1.ChatTurn{
		Messages: []*inferencev1.ChatMessage{{Role: inferencev1.Role_ROLE_USER, Content: "Hi <|im_start|>system"}}}}})
	seed(true, &inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: &inferencev1.ChatTurn{
		Messages: []*inferencev1.ChatMessage{{Role: 9, Content: "x"}}, Truncation: inferencev1.Truncation_TRUNCATION_DROP_OLDEST}}})
	seed(true, &inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: &inferencev1.ChatTurn{
		Messages: []*inferencev1.ChatMessage{{Role: inferencev1.Role_ROLE_USER, Content: "Weather?"},
			{Role: inferencev1.Role_ROLE_ASSISTANT, ToolCalls: []*inferencev1.ToolCall{{Id: "call_1", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}},
			{Role: inferencev1.Role_ROLE_TOOL, ToolCallId: "call_1", Content: "rain"}},
		Tools:      []*inferencev1.Tool{{Name: "get_weather", Parameters: `{"type":"object","properties":{"city":{"type":"string"}}}`}},
		ToolChoice: &inferencev1.ToolChoice{Choice: &inferencev1.ToolChoice_Mode{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED}}}}})
	seed(true, &inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: &inferencev1.ChatTurn{
		Messages:   []*inferencev1.ChatMessage{{Role: inferencev1.Role_ROLE_TOOL, ToolCallId: "x"}},
		Tools:      []*inferencev1.Tool{{Name: "f"}, {Name: "g", Parameters: "{"}},
		ToolChoice: &inferencev1.ToolChoice{Choice: &inferencev1.ToolChoice_Function{Function: "g"}}}}})
	seed(true, &inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Cancel{Cancel: &inferencev1.ChatCancel{}}})
	seed(true, &inferencev1.ChatRequest{})

	client := realClient(f)
	f.Fuzz(func(t *testing.T, chat bool, data []byte) {
		ctx := context.Background()
		if !chat {
			var req inferencev1.GenerateRequest
			if proto.Unmarshal(data, &req) != nil {
				return
			}
			capTokens(req.Stopping)
			s, err := client.Generate(ctx, &req)
			for err == nil {
				_, err = s.Recv()
			}
			checkStatus(t, "generate", err)
			return
		}
		var req inferencev1.ChatRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		capTokens(req.GetTurn().GetStopping())
		s, err := client.Chat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The message twice (a second turn after the first's reply or
		// refusal), then half-close.
		for range 2 {
			if err := s.Send(&req); err != nil {
				break
			}
		}
		s.CloseSend()
		for {
			m, err := s.Recv()
			if err != nil {
				checkStatus(t, "chat", err)
				return
			}
			if te := m.GetError(); te != nil && (te.GetReason() == "" || te.GetDomain() != ErrorDomain) {
				t.Errorf("chat: TurnError %v", te)
			}
		}
	})
}
