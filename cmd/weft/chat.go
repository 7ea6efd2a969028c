package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
)

func init() {
	register(command{name: "chat", short: "chat with a server in the terminal (Chat RPC)", run: runChat})
}

const chatHelp = `type a message and press Enter. Ctrl-C stops a reply (the conversation keeps it);
Ctrl-C at the prompt or Ctrl-D quits. Commands:
  /clear          start a new conversation
  /system TEXT    set the system message (empty: none) and start a new conversation
  /params [max_tokens=N] [temperature=T]   show or set the reply parameters
  /help           this text`

func runChat(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	system := fs.String("system", "", "system message sent with the first turn")
	maxTokens := fs.Int("max-tokens", 256, "most tokens per reply")
	temp := fs.Float64("temperature", 0.7, "sampling temperature (0: greedy)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	conn, err := cf.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	// Ctrl-C is the loop's to interpret (cancel the reply or quit), so the
	// command's context does not end with it; SIGTERM quits.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	fmt.Fprintln(os.Stderr, chatHelp)
	return chatLoop(context.WithoutCancel(ctx), inferencev1.NewInferenceServiceClient(conn), os.Stdin, os.Stdout, sigs,
		chatOptions{System: *system, MaxTokens: int32(*maxTokens), Temperature: float32(*temp)})
}

// chatOptions configure chatLoop.
type chatOptions struct {
	System      string  // system message for the first turn ("" for none)
	MaxTokens   int32   // per reply
	Temperature float32 // sampling temperature
}

// chatStream is one conversation: a Chat stream and the goroutine that
// receives from it. That goroutine ends when Recv fails, which close
// causes (CloseSend, then the stream's context is cancelled).
type chatStream struct {
	stream grpc.BidiStreamingClient[inferencev1.ChatRequest, inferencev1.ChatResponse]
	msgs   chan chatRecv // closed when the receiver ends
	cancel context.CancelFunc
}

type chatRecv struct {
	m   *inferencev1.ChatResponse
	err error
}

func openChat(ctx context.Context, c inferencev1.InferenceServiceClient) (*chatStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	st, err := c.Chat(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &chatStream{stream: st, msgs: make(chan chatRecv), cancel: cancel}
	go func() {
		defer close(s.msgs)
		for {
			m, err := st.Recv()
			select {
			case s.msgs <- chatRecv{m, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return s, nil
}

// close ends the conversation and waits for its receiver to end.
func (s *chatStream) close() {
	s.stream.CloseSend()
	s.cancel()
	for range s.msgs {
	}
}

// errQuit ends the loop without an error (Ctrl-C while a reply is being
// cancelled, or SIGTERM).
var errQuit = errors.New("quit")

// chatLoop reads lines from in: a line is a user turn on the current Chat
// stream (one stream per conversation), or a command (chatHelp). Replies
// are streamed to out, each followed by a line of statistics. From sigs,
// os.Interrupt while a reply streams sends ChatCancel (the partial reply
// stays in the conversation), a second one quits; os.Interrupt at the
// prompt, any other signal, or the end of in (Ctrl-D) quits with nil.
//
// A goroutine reads in; it ends at in's end or error, or, once chatLoop
// has returned, after the read in progress (for a terminal: the next line
// or the process's exit).
func chatLoop(ctx context.Context, c inferencev1.InferenceServiceClient, in io.Reader, out io.Writer, sigs <-chan os.Signal, o chatOptions) error {
	lines := make(chan string)
	readErr := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-done:
				return
			}
		}
		readErr <- sc.Err()
	}()

	var s *chatStream
	defer func() {
		if s != nil {
			s.close()
		}
	}()
	first := true
	newConversation := func() {
		if s != nil {
			s.close()
			s = nil
		}
		first = true
	}
	for {
		fmt.Fprint(out, "> ")
		var line string
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sigs:
			fmt.Fprintln(out)
			return nil
		case err := <-readErr:
			fmt.Fprintln(out)
			return err
		case line = <-lines:
		}
		line = strings.TrimSpace(line)
		switch cmd, arg, _ := strings.Cut(line, " "); {
		case line == "":
			continue
		case cmd == "/clear":
			newConversation()
			fmt.Fprintln(out, "(new conversation)")
			continue
		case cmd == "/system":
			o.System = strings.TrimSpace(arg)
			newConversation()
			fmt.Fprintf(out, "(system message %q; new conversation)\n", o.System)
			continue
		case cmd == "/params":
			if err := setChatParams(&o, arg); err != nil {
				fmt.Fprintf(out, "(%v)\n", err)
			}
			fmt.Fprintf(out, "(max_tokens=%d temperature=%g system=%q)\n", o.MaxTokens, o.Temperature, o.System)
			continue
		case cmd == "/help":
			fmt.Fprintln(out, chatHelp)
			continue
		case strings.HasPrefix(cmd, "/"):
			fmt.Fprintf(out, "(unknown command %s; /help lists them)\n", cmd)
			continue
		}
		if s == nil {
			var err error
			if s, err = openChat(ctx, c); err != nil {
				return err
			}
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
		if err := s.stream.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: turn}}); err != nil {
			return err
		}
		if err := chatReply(ctx, s, out, sigs); err != nil {
			switch {
			case errors.Is(err, errQuit):
				return nil
			case errors.Is(err, errRefused):
				// The refused turn is not in the conversation, so a system
				// message it carried is sent again with the next one.
				first = withSystem
				continue
			}
			return err
		}
	}
}

// errRefused is chatReply's word that the server refused the turn (a
// TurnError); the stream and the conversation go on.
var errRefused = errors.New("turn refused")

// chatReply prints one streamed reply up to its final message, then the
// statistics line; os.Interrupt sends ChatCancel once, again quits.
func chatReply(ctx context.Context, s *chatStream, out io.Writer, sigs <-chan os.Signal) error {
	start := time.Now()
	var firstAt time.Time
	cancelled := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case sig := <-sigs:
			if sig != os.Interrupt || cancelled {
				fmt.Fprintln(out)
				return errQuit
			}
			cancelled = true
			if err := s.stream.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Cancel{Cancel: &inferencev1.ChatCancel{}}}); err != nil {
				return err
			}
		case r, ok := <-s.msgs:
			if !ok {
				return errors.New("chat stream closed")
			}
			if r.err != nil {
				if errors.Is(r.err, io.EOF) {
					return errors.New("the server ended the conversation")
				}
				return r.err
			}
			if ch := r.m.GetChunk(); ch != nil {
				if firstAt.IsZero() {
					firstAt = time.Now()
				}
				fmt.Fprint(out, ch.GetText())
			}
			if f := r.m.GetFinal(); f != nil {
				fmt.Fprintln(out)
				fmt.Fprintln(out, chatStats(f, time.Since(start), firstAt.Sub(start)))
				return nil
			}
			if te := r.m.GetError(); te != nil {
				// The server refused the turn; the conversation goes on
				// without it.
				fmt.Fprintf(out, "[refused: %s: %s]\n", te.GetReason(), te.GetMessage())
				return errRefused
			}
		}
	}
}

// chatStats is the line after a reply: tokens, tokens/s over the whole
// reply, time to the first token and, unless EOS, why it ended.
func chatStats(f *inferencev1.Final, total, ttft time.Duration) string {
	n := f.GetUsage().GetCompletionTokens()
	var tps float64
	if total > 0 {
		tps = float64(n) / total.Seconds()
	}
	line := fmt.Sprintf("[%d tokens, %.1f tokens/s, first token %v", n, tps, ttft.Round(time.Millisecond))
	switch f.GetFinishReason() {
	case inferencev1.FinishReason_FINISH_REASON_EOS, inferencev1.FinishReason_FINISH_REASON_STOP_SEQUENCE:
	case inferencev1.FinishReason_FINISH_REASON_CANCELLED:
		line += ", cancelled"
	case inferencev1.FinishReason_FINISH_REASON_LENGTH:
		line += ", max_tokens reached"
	case inferencev1.FinishReason_FINISH_REASON_ERROR:
		line += ", error: " + f.GetErrorMessage()
	default:
		line += ", " + strings.ToLower(strings.TrimPrefix(f.GetFinishReason().String(), "FINISH_REASON_"))
	}
	return line + "]"
}

// setChatParams applies /params KEY=VALUE pairs (max_tokens, temperature).
func setChatParams(o *chatOptions, arg string) error {
	for _, kv := range strings.Fields(arg) {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "max_tokens":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1 {
				return fmt.Errorf("max_tokens=%q: want a count >= 1", v)
			}
			o.MaxTokens = int32(n)
		case "temperature":
			t, err := strconv.ParseFloat(v, 32)
			if err != nil || t < 0 {
				return fmt.Errorf("temperature=%q: want a number >= 0", v)
			}
			o.Temperature = float32(t)
		default:
			return fmt.Errorf("unknown parameter %q: max_tokens or temperature", k)
		}
	}
	return nil
}
