package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
)

// fakeChat is an in-process Chat server that records what each stream
// receives. A user message "long" gets one chunk and then waits for a
// ChatCancel (telling the test on streaming); any other gets "ok" and EOS.
type fakeChat struct {
	inferencev1.UnimplementedInferenceServiceServer
	streaming chan struct{}

	mu      sync.Mutex
	streams [][]string // per stream: "turn: role:content|... max=N temp=T" or "cancel"
}

func (f *fakeChat) record(i int, s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams[i] = append(f.streams[i], s)
}

func (f *fakeChat) Chat(st grpc.BidiStreamingServer[inferencev1.ChatRequest, inferencev1.ChatResponse]) error {
	f.mu.Lock()
	idx := len(f.streams)
	f.streams = append(f.streams, nil)
	f.mu.Unlock()
	final := func(turn int32, reason inferencev1.FinishReason, n int32) error {
		return st.Send(&inferencev1.ChatResponse{Turn: turn, Response: &inferencev1.ChatResponse_Final{Final: &inferencev1.Final{
			FinishReason: reason, Usage: &inferencev1.Usage{CompletionTokens: n}}}})
	}
	chunk := func(turn int32, text string) error {
		return st.Send(&inferencev1.ChatResponse{Turn: turn, Response: &inferencev1.ChatResponse_Chunk{Chunk: &inferencev1.Chunk{Text: text}}})
	}
	var turn int32
	for {
		req, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		t := req.GetTurn()
		if t == nil {
			f.record(idx, "stray cancel")
			continue
		}
		turn++
		var parts []string
		for _, m := range t.GetMessages() {
			parts = append(parts, strings.ToLower(strings.TrimPrefix(m.GetRole().String(), "ROLE_"))+":"+m.GetContent())
		}
		f.record(idx, strings.Join(parts, "|")+fmt.Sprintf(" max=%d temp=%g", t.GetStopping().GetMaxTokens(), t.GetSampling().GetTemperature()))
		if parts[len(parts)-1] != "user:long" {
			if err := chunk(turn, "ok"); err != nil {
				return err
			}
			if err := final(turn, inferencev1.FinishReason_FINISH_REASON_EOS, 1); err != nil {
				return err
			}
			continue
		}
		if err := chunk(turn, "partial"); err != nil {
			return err
		}
		f.streaming <- struct{}{}
		req, err = st.Recv()
		if err != nil {
			return err
		}
		if req.GetCancel() == nil {
			f.record(idx, "expected a cancel")
			return nil
		}
		f.record(idx, "cancel")
		if err := final(turn, inferencev1.FinishReason_FINISH_REASON_CANCELLED, 1); err != nil {
			return err
		}
	}
}

func startFakeChat(t *testing.T) (*fakeChat, inferencev1.InferenceServiceClient) {
	t.Helper()
	f := &fakeChat{streaming: make(chan struct{})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	inferencev1.RegisterInferenceServiceServer(srv, f)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return f, inferencev1.NewInferenceServiceClient(conn)
}

// TestChatLoop drives the chat client through its own input loop: Ctrl-C
// during a reply cancels it on the same stream and the conversation goes
// on; /params, /system and /clear; Ctrl-D (the end of input) quits.
func TestChatLoop(t *testing.T) {
	f, client := startFakeChat(t)
	sigs := make(chan os.Signal)
	go func() {
		<-f.streaming
		sigs <- os.Interrupt
	}()
	in := strings.NewReader("long\n/params max_tokens=7 temperature=0.5\nshort\n/system Be brief.\nshort again\n/clear\nlast\n/params temperature=-1\n/nope\n")
	var out strings.Builder
	if err := chatLoop(context.Background(), client, in, &out, sigs, chatOptions{System: "S0", MaxTokens: 64, Temperature: 0.7}); err != nil {
		t.Fatalf("chatLoop: %v\n%s", err, out.String())
	}
	want := [][]string{
		{"system:S0|user:long max=64 temp=0.7", "cancel", "user:short max=7 temp=0.5"},
		{"system:Be brief.|user:short again max=7 temp=0.5"},
		{"system:Be brief.|user:last max=7 temp=0.5"},
	}
	f.mu.Lock()
	got := f.streams
	f.mu.Unlock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what the server received, per stream (-want +got):\n%s", diff)
	}
	transcript := out.String()
	for _, s := range []string{
		"partial\n[1 tokens, ", ", cancelled]",
		"(max_tokens=7 temperature=0.5 system=\"S0\")",
		"(system message \"Be brief.\"; new conversation)",
		"(new conversation)",
		"(temperature=\"-1\": want a number >= 0)",
		"(unknown command /nope; /help lists them)",
	} {
		if !strings.Contains(transcript, s) {
			t.Errorf("transcript lacks %q:\n%s", s, transcript)
		}
	}
	if n := strings.Count(transcript, "tokens/s"); n != 4 {
		t.Errorf("%d statistics lines, want one per reply (4):\n%s", n, transcript)
	}
}

// TestChatLoopQuits: Ctrl-C at the prompt quits, so does SIGTERM during a
// reply, and a second Ctrl-C while a cancel is pending.
func TestChatLoopQuits(t *testing.T) {
	t.Run("interrupt at the prompt", func(t *testing.T) {
		_, client := startFakeChat(t)
		sigs := make(chan os.Signal, 1)
		sigs <- os.Interrupt
		pr, pw := io.Pipe() // no input ever arrives
		defer pw.Close()
		if err := chatLoop(context.Background(), client, pr, io.Discard, sigs, chatOptions{MaxTokens: 4}); err != nil {
			t.Fatalf("chatLoop: %v", err)
		}
	})
	for _, seq := range [][]os.Signal{{syscall.SIGTERM}, {os.Interrupt, os.Interrupt}} {
		t.Run(fmt.Sprint(seq), func(t *testing.T) {
			f, client := startFakeChat(t)
			sigs := make(chan os.Signal, len(seq))
			go func() {
				<-f.streaming
				for _, s := range seq {
					sigs <- s
				}
			}()
			if err := chatLoop(context.Background(), client, strings.NewReader("long\n"), io.Discard, sigs, chatOptions{MaxTokens: 4}); err != nil {
				t.Fatalf("chatLoop: %v", err)
			}
		})
	}
}
