package server

import (
	"errors"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/scheduler"
)

var roleNames = map[inferencev1.Role]string{
	inferencev1.Role_ROLE_SYSTEM:    "system",
	inferencev1.Role_ROLE_USER:      "user",
	inferencev1.Role_ROLE_ASSISTANT: "assistant",
}

// chatReply is the reply streaming for one turn.
type chatReply struct {
	st      *scheduler.Stream
	done    chan frontdoor.Followed // the following's end
	stalled <-chan time.Time        // one Send blocked past the stall limit
	text    strings.Builder         // the text sent, read after done
	index   int32
	prev    []chat.Message // the conversation before the turn
}

// Chat implements InferenceService.Chat. The handler goroutine owns the
// conversation; one goroutine receives client messages and, per turn, one
// pump goroutine sends the reply (turns never overlap, so one goroutine at a
// time calls Send).
func (s *Server) Chat(stream grpc.BidiStreamingServer[inferencev1.ChatRequest, inferencev1.ChatResponse]) error {
	if !s.door.HasChat() {
		return s.refuse(frontdoor.ErrNoChat)
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
		trunc := frontdoor.Reject
		if t.GetTruncation() == inferencev1.Truncation_TRUNCATION_DROP_OLDEST {
			trunc = frontdoor.DropOldest
		}
		msgs, prompt, err := s.door.ChatPrompt(ctx, msgs, len(conv), trunc)
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
		prev := conv
		conv = msgs
		idx := next
		next++
		rep := &chatReply{st: st, done: make(chan frontdoor.Followed, 1), index: idx, prev: prev}
		rep.stalled = s.door.Follow(ctx, st, s.follow(r, time.Now(), rep.done, func(c *inferencev1.Chunk, f *inferencev1.Final) error {
			m := &inferencev1.ChatResponse{Turn: idx}
			if c != nil {
				rep.text.WriteString(c.Text)
				m.Response = &inferencev1.ChatResponse_Chunk{Chunk: c}
			} else {
				m.Response = &inferencev1.ChatResponse_Final{Final: f}
				m.LoadReport = s.load.turnReport()
			}
			return stream.Send(m)
		}))
		reply = rep
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
			doneC  <-chan frontdoor.Followed
			stallC <-chan time.Time
			reqC   = reqs
		)
		if reply != nil {
			doneC, stallC = reply.done, reply.stalled
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
			rep := reply
			reply = nil
			if errors.Is(res.Err, frontdoor.ErrQueueTimeout) {
				// Never admitted: refused like a turn the queue had no
				// room for, and the conversation is as it was.
				conv = rep.prev
				s.metrics.rejected.WithLabelValues(rejectReason(res.Err)).Inc()
				if err := stream.Send(&inferencev1.ChatResponse{Turn: rep.index, Response: &inferencev1.ChatResponse_Error{Error: turnError(res.Err)}}); err != nil {
					return Status(err)
				}
			} else {
				conv = append(conv, chat.Message{Role: "assistant", Content: rep.text.String()})
				if res.Err != nil {
					return Status(res.Err)
				}
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
