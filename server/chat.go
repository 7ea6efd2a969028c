package server

import (
	"context"
	"errors"
	"io"
	"slices"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/tokenizer"
	"github.com/weft-inference/weft/scheduler"
)

var roleNames = map[inferencev1.Role]string{
	inferencev1.Role_ROLE_SYSTEM:    "system",
	inferencev1.Role_ROLE_USER:      "user",
	inferencev1.Role_ROLE_ASSISTANT: "assistant",
}

// chatReply is the reply streaming for one turn.
type chatReply struct {
	st    *scheduler.Stream
	pump  pumping
	index int32
}

// Chat implements InferenceService.Chat. The handler goroutine owns the
// conversation; one goroutine receives client messages and, per turn, one
// pump goroutine sends the reply (turns never overlap, so one goroutine at a
// time calls Send).
func (s *Server) Chat(stream grpc.BidiStreamingServer[inferencev1.ChatRequest, inferencev1.ChatResponse]) error {
	if s.cfg.Chat == nil {
		return s.refuse(reqErr(codes.FailedPrecondition, ReasonNoChatTemplate, "", "the model has no chat template"))
	}
	ctx := stream.Context()
	reqs := make(chan *inferencev1.ChatRequest)
	recvErr := make(chan error, 1)
	// The receiver ends when Recv fails: at the client's half-close or when
	// this handler returns (which ends the stream).
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- m:
			case <-ctx.Done():
				recvErr <- ctx.Err()
				return
			}
		}
	}()

	var (
		conv        []chat.Message
		reply       *chatReply
		pending     *inferencev1.ChatTurn // a turn that interrupted the reply
		next        int32
		clientDone  bool
		recvErrChan = (<-chan error)(recvErr)
	)
	// start begins the reply to t, or returns why t is refused; a refused
	// turn leaves the conversation as it was.
	start := func(t *inferencev1.ChatTurn) error {
		if len(t.GetMessages()) == 0 {
			return badField("turn.messages", "a turn needs at least one message")
		}
		msgs := slices.Clip(conv)
		for i, m := range t.GetMessages() {
			name, ok := roleNames[m.GetRole()]
			if !ok {
				return badField("turn.messages.role", "message %d has role %v", i, m.GetRole())
			}
			if !utf8.ValidString(m.GetContent()) {
				return reqErr(codes.InvalidArgument, ReasonInvalidUTF8, "turn.messages.content", "message %d is not valid UTF-8", i)
			}
			msgs = append(msgs, chat.Message{Role: name, Content: m.GetContent()})
		}
		msgs, prompt, err := s.chatPrompt(ctx, msgs, len(conv), t.GetTruncation())
		if err != nil {
			return err
		}
		r, err := s.buildRequest(t.GetRequestId(), prompt, t, 0)
		if err != nil {
			return err
		}
		st, err := s.cfg.Scheduler.Submit(ctx, r)
		if err != nil {
			return err
		}
		conv = msgs
		idx := next
		next++
		p := s.pump(ctx, st, r, time.Now(), func(c *inferencev1.Chunk, f *inferencev1.Final) error {
			m := &inferencev1.ChatResponse{Turn: idx}
			if c != nil {
				m.Response = &inferencev1.ChatResponse_Chunk{Chunk: c}
			} else {
				m.Response = &inferencev1.ChatResponse_Final{Final: f}
				m.LoadReport = s.load.turnReport()
			}
			return stream.Send(m)
		})
		reply = &chatReply{st: st, pump: p, index: idx}
		return nil
	}
	// startOrRefuse starts t; a refused turn gets its TurnError (no reply
	// is streaming, so this goroutine may Send) and the stream goes on.
	// Only errors that end the stream are returned.
	startOrRefuse := func(t *inferencev1.ChatTurn) error {
		err := start(t)
		if err == nil {
			return nil
		}
		te := turnError(err)
		s.metrics.rejected.WithLabelValues(rejectReason(err)).Inc()
		if te == nil {
			return err
		}
		idx := next
		next++
		return stream.Send(&inferencev1.ChatResponse{Turn: idx, Response: &inferencev1.ChatResponse_Error{Error: te}})
	}
	turn := func(t *inferencev1.ChatTurn) error {
		if reply != nil {
			// Interrupt: the reply ends (its partial text is kept) and this
			// turn starts (or is refused) when it has.
			reply.st.Cancel()
			pending = t
			return nil
		}
		return startOrRefuse(t)
	}

	for {
		var (
			doneC  <-chan pumpResult
			stallC <-chan time.Time
			reqC   = reqs
		)
		if reply != nil {
			doneC, stallC = reply.pump.done, reply.pump.stalled
		}
		if clientDone || pending != nil {
			reqC = nil // finish the interrupted reply before reading on
		}
		select {
		case m := <-reqC:
			var err error
			switch r := m.GetRequest().(type) {
			case *inferencev1.ChatRequest_Turn:
				err = turn(r.Turn)
			case *inferencev1.ChatRequest_Cancel:
				if reply != nil {
					reply.st.Cancel()
				}
			default:
				err = reqErr(codes.InvalidArgument, ReasonInvalidParameter, "request", "empty chat request (want turn or cancel)")
			}
			if err != nil {
				if reply != nil {
					reply.st.Cancel()
				}
				return Status(err)
			}
		case err := <-recvErrChan:
			recvErrChan = nil
			if !errors.Is(err, io.EOF) {
				if reply != nil {
					reply.st.Cancel()
				}
				return Status(err)
			}
			clientDone = true
			if reply == nil && pending == nil {
				return nil
			}
		case res := <-doneC:
			reply = nil
			conv = append(conv, chat.Message{Role: "assistant", Content: res.text})
			if res.err != nil {
				return Status(res.err)
			}
			if pending != nil {
				t := pending
				pending = nil
				if err := startOrRefuse(t); err != nil {
					return Status(err)
				}
			} else if clientDone {
				return nil
			}
		case <-stallC:
			reply.st.Cancel()
			return Status(errSlowReader)
		}
	}
}

// chatPrompt renders and tokenizes msgs, whose first keep messages are the
// conversation so far. Message contents are tokenized as plain text (they
// never produce control tokens); only the template's own text does. A
// conversation over MaxPromptBytes (its contents summed, then the rendered
// prompt) or the context is refused with PROMPT_TOO_LONG, or, with
// TRUNCATION_DROP_OLDEST, loses the fewest oldest non-system messages of the
// conversation so far (an assistant reply goes with the message before it)
// that make it fit, found by bisection (a logarithmic number of renders). It
// returns the conversation as sent and its prompt.
func (s *Server) chatPrompt(ctx context.Context, msgs []chat.Message, keep int, trunc inferencev1.Truncation) ([]chat.Message, []int32, error) {
	prompt, err := s.chatTry(ctx, msgs)
	if err == nil || trunc != inferencev1.Truncation_TRUNCATION_DROP_OLDEST || !tooLong(err) {
		return msgs, prompt, err
	}
	// unit[i] numbers the droppable units of the conversation so far: a
	// non-system message and the assistant replies right after it. System
	// messages (-1) and the new turn's messages are never dropped.
	unit := make([]int, keep)
	units := 0
	for i, m := range msgs[:keep] {
		switch {
		case m.Role == "system":
			unit[i] = -1
		case m.Role == "assistant" && i > 0 && unit[i-1] >= 0:
			unit[i] = unit[i-1]
		default:
			unit[i] = units
			units++
		}
	}
	without := func(d int) []chat.Message { // msgs less the d oldest units
		out := make([]chat.Message, 0, len(msgs))
		for i, m := range msgs {
			if i >= keep || unit[i] < 0 || unit[i] >= d {
				out = append(out, m)
			}
		}
		return out
	}
	if units == 0 {
		return nil, nil, err
	}
	bestPrompt, err := s.chatTry(ctx, without(units))
	if err != nil {
		return nil, nil, err // it does not fit even with all of them gone
	}
	best, lo := units, 0 // without(lo) does not fit; without(best) does
	for best-lo > 1 {
		mid := (lo + best) / 2
		p, err := s.chatTry(ctx, without(mid))
		switch {
		case err == nil:
			best, bestPrompt = mid, p
		case tooLong(err):
			lo = mid
		default:
			return nil, nil, err
		}
	}
	return without(best), bestPrompt, nil
}

// tooLong reports a PROMPT_TOO_LONG refusal.
func tooLong(err error) bool {
	var re *requestError
	return errors.As(err, &re) && re.reason == ReasonPromptTooLong
}

// chatTry renders and tokenizes msgs, refusing them with PROMPT_TOO_LONG
// when they do not fit (bytes before tokenizing, then tokens).
func (s *Server) chatTry(ctx context.Context, msgs []chat.Message) ([]int32, error) {
	n := 0
	for _, m := range msgs {
		n += len(m.Content)
	}
	if err := s.checkPromptBytes("turn.messages.content", n); err != nil {
		return nil, err
	}
	parts, err := s.cfg.Chat.RenderSegments(msgs, true)
	if err != nil {
		return nil, reqErr(codes.InvalidArgument, ReasonChatTemplate, "turn.messages", "%v", err)
	}
	segs := make([]tokenizer.Segment, len(parts))
	rendered := 0
	for i, p := range parts {
		segs[i] = tokenizer.Segment{Text: p.Text, ParseSpecial: !p.Content}
		rendered += len(p.Text)
	}
	// The template's own text counts too (many empty messages render to
	// much markup): the whole prompt is bounded before tokenizing.
	if err := s.checkPromptBytes("turn.messages", rendered); err != nil {
		return nil, err
	}
	prompt, err := s.encodeSegments(ctx, segs, false)
	if err != nil {
		return nil, err
	}
	if bt, ok := s.cfg.Tokenizer.(bosTokenizer); ok && bt.AddBOS() && (len(prompt) == 0 || prompt[0] != bt.BOS()) {
		prompt = append([]int32{bt.BOS()}, prompt...)
	}
	if len(prompt) >= s.cfg.Info.ContextLen {
		return nil, promptTooLong(len(prompt), s.cfg.Info.ContextLen)
	}
	return prompt, nil
}
