package server

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/scheduler"
)

// chatTurnResult is one turn's reply as the client saw it.
type chatTurnResult struct {
	tokens []int32
	text   string
	final  *inferencev1.Final
}

// TestChat runs one bidirectional stream: two turns, a third interrupted
// mid-reply by a cancel, a fourth that must see the partial reply in the
// conversation, and a fifth interrupted by a new turn (the sixth).
func TestChat(t *testing.T) {
	h := newHarness(t, harnessOpts{gated: true, sched: func(c *scheduler.Config) { c.BlockSize = 4 }})
	ctx := context.Background()
	stream, err := h.client.Chat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make(chan *inferencev1.ChatResponse)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			msgs <- m
		}
	}()
	// next returns the next message, running the model while it waits.
	next := func() *inferencev1.ChatResponse {
		t.Helper()
		for {
			select {
			case m := <-msgs:
				return m
			case err := <-recvErr:
				t.Fatalf("chat stream ended: %v", err)
			case h.model.Gate <- struct{}{}:
			}
		}
	}
	send := func(content string, maxTokens int32) {
		t.Helper()
		err := stream.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: &inferencev1.ChatTurn{
			Messages: []*inferencev1.ChatMessage{{Role: inferencev1.Role_ROLE_USER, Content: content}},
			Stopping: &inferencev1.StoppingCriteria{MaxTokens: maxTokens},
		}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	// readTurn reads the reply of turn idx up to its final.
	readTurn := func(idx int32, r *chatTurnResult) {
		t.Helper()
		for r.final == nil {
			m := next()
			if m.GetTurn() != idx {
				t.Fatalf("message for turn %d while reading turn %d", m.GetTurn(), idx)
			}
			if c := m.GetChunk(); c != nil {
				r.tokens = append(r.tokens, c.GetTokenIds()...)
				r.text += c.GetText()
			}
			r.final = m.GetFinal()
		}
	}
	var conv []chat.Message
	// expect checks a completed reply against the fake model run on the
	// rendered conversation, and adds the reply to conv.
	expect := func(idx int32, user string, r chatTurnResult, n int, reason inferencev1.FinishReason) {
		t.Helper()
		conv = append(conv, chat.Message{Role: "user", Content: user})
		text, _ := fakeChat{}.Render(conv, true)
		prompt := append([]int32{fakeBOS}, fakeTokenizer{}.Encode(text, false, true)...)
		want := refGenerate(prompt, n)
		if diff := cmp.Diff(want, r.tokens); diff != "" {
			t.Errorf("turn %d tokens (-want +got):\n%s", idx, diff)
		}
		if r.final.GetFinishReason() != reason || r.final.GetUsage().GetPromptTokens() != int32(len(prompt)) {
			t.Errorf("turn %d final %v, want reason %v and %d prompt tokens", idx, r.final, reason, len(prompt))
		}
		conv = append(conv, chat.Message{Role: "assistant", Content: r.text})
	}

	var r0, r1 chatTurnResult
	send("hi", 8)
	readTurn(0, &r0)
	expect(0, "hi", r0, 8, inferencev1.FinishReason_FINISH_REASON_LENGTH)
	send("tell me more", 8)
	readTurn(1, &r1)
	expect(1, "tell me more", r1, 8, inferencev1.FinishReason_FINISH_REASON_LENGTH)
	if r1.final.GetUsage().GetCachedTokens() == 0 {
		t.Errorf("turn 1 reused no cached prefix: %v", r1.final.GetUsage())
	}

	// Turn 2: a long reply, cancelled after its first chunk.
	var r2 chatTurnResult
	send("a long story please", 3000)
	m := next()
	r2.tokens, r2.text = m.GetChunk().GetTokenIds(), m.GetChunk().GetText()
	if err := stream.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Cancel{Cancel: &inferencev1.ChatCancel{}}}); err != nil {
		t.Fatal(err)
	}
	readTurn(2, &r2)
	if len(r2.tokens) == 0 || len(r2.tokens) >= 3000 {
		t.Fatalf("interrupted reply has %d tokens", len(r2.tokens))
	}
	expect(2, "a long story please", r2, len(r2.tokens), inferencev1.FinishReason_FINISH_REASON_CANCELLED)

	// Turn 3 sees the partial reply as what the assistant said.
	var r3 chatTurnResult
	send("and then?", 8)
	readTurn(3, &r3)
	expect(3, "and then?", r3, 8, inferencev1.FinishReason_FINISH_REASON_LENGTH)

	// Turn 4 is interrupted by turn 5.
	var r4, r5 chatTurnResult
	send("another long one", 3000)
	m = next()
	r4.tokens, r4.text = m.GetChunk().GetTokenIds(), m.GetChunk().GetText()
	send("stop, short please", 8)
	readTurn(4, &r4)
	expect(4, "another long one", r4, len(r4.tokens), inferencev1.FinishReason_FINISH_REASON_CANCELLED)
	readTurn(5, &r5)
	expect(5, "stop, short please", r5, 8, inferencev1.FinishReason_FINISH_REASON_LENGTH)

	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-recvErr:
		if !errors.Is(err, io.EOF) {
			t.Errorf("stream ended with %v, want EOF", err)
		}
	case m := <-msgs:
		t.Errorf("unexpected message after the last turn: %v", m)
	}
}
