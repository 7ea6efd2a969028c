package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
)

func init() {
	register(command{name: "chat", short: "chat with a server in the terminal (Chat RPC)", run: runChat})
}

func runChat(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:50051", "server `host:port`")
	system := fs.String("system", "", "system message sent with the first turn")
	maxTokens := fs.Int("max-tokens", 256, "most tokens per reply")
	temp := fs.Float64("temperature", 0.7, "sampling temperature (0: greedy)")
	token := fs.String("auth-token", "", "bearer token")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	if *token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+*token)
	}
	fmt.Fprintln(os.Stderr, "type a message and press Enter; Ctrl-D to quit")
	return chatLoop(ctx, inferencev1.NewInferenceServiceClient(conn), os.Stdin, os.Stdout,
		chatOptions{System: *system, MaxTokens: int32(*maxTokens), Temperature: float32(*temp)})
}

// chatOptions configure chatLoop.
type chatOptions struct {
	System      string  // system message for the first turn ("" for none)
	MaxTokens   int32   // per reply
	Temperature float32 // sampling temperature
}

// chatLoop sends each line of in as a user turn on one Chat stream and
// writes the streamed replies to out, one reply per line.
func chatLoop(ctx context.Context, c inferencev1.InferenceServiceClient, in io.Reader, out io.Writer, o chatOptions) error {
	stream, err := c.Chat(ctx)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	first := true
	for {
		fmt.Fprint(out, "> ")
		if !sc.Scan() {
			break
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		turn := &inferencev1.ChatTurn{
			Sampling: &inferencev1.SamplingParams{Temperature: o.Temperature},
			Stopping: &inferencev1.StoppingCriteria{MaxTokens: o.MaxTokens},
		}
		if first && o.System != "" {
			turn.Messages = append(turn.Messages, &inferencev1.ChatMessage{Role: inferencev1.Role_ROLE_SYSTEM, Content: o.System})
		}
		withSystem := first && o.System != ""
		first = false
		turn.Messages = append(turn.Messages, &inferencev1.ChatMessage{Role: inferencev1.Role_ROLE_USER, Content: line})
		if err := stream.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: turn}}); err != nil {
			return err
		}
		for {
			m, err := stream.Recv()
			if err != nil {
				return err
			}
			if ch := m.GetChunk(); ch != nil {
				fmt.Fprint(out, ch.GetText())
			}
			if f := m.GetFinal(); f != nil {
				fmt.Fprintln(out)
				if f.GetFinishReason() == inferencev1.FinishReason_FINISH_REASON_ERROR {
					fmt.Fprintf(out, "[error: %s]\n", f.GetErrorMessage())
				}
				break
			}
			if te := m.GetError(); te != nil {
				// The server refused the turn; the conversation goes on
				// without it (so the system message is sent again).
				fmt.Fprintf(out, "[refused: %s: %s]\n", te.GetReason(), te.GetMessage())
				first = withSystem
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	if _, err := stream.Recv(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}
