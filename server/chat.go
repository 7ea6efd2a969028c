package server

import (
	"context"
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
	"github.com/weft-inference/weft/runtime/toolcall"
	"github.com/weft-inference/weft/scheduler"
)

var roleNames = map[inferencev1.Role]string{
	inferencev1.Role_ROLE_SYSTEM:    "system",
	inferencev1.Role_ROLE_USER:      "user",
	inferencev1.Role_ROLE_ASSISTANT: "assistant",
	inferencev1.Role_ROLE_TOOL:      "tool",
}

type chatStream = grpc.BidiStreamingServer[inferencev1.ChatRequest, inferencev1.ChatResponse]

// chatReply is the reply streaming for one turn.
type chatReply struct {
	st      *scheduler.Stream
	done    chan frontdoor.Followed // the following's end
	stalled <-chan time.Time        // one Send blocked past the stall limit
	text    strings.Builder         // the reply's text as generated, read after done
	index   int32
	prev    []chat.Message // the conversation before the turn
	// parsed reads the reply into content, reasoning and tool calls (a
	// turn with tools, frontdoor.ToolSpec.Parse), else nil; parseErr is
	// its *frontdoor.ToolCallError, once the Final said so.
	parsed   *frontdoor.Reply
	parseErr error
}

// chatSession is one Chat stream's state, owned by its handler goroutine.
type chatSession struct {
	s      *Server
	ctx    context.Context
	stream chatStream

	conv       []chat.Message        // the conversation so far
	reply      *chatReply            // the reply streaming, nil between turns
	pending    *inferencev1.ChatTurn // a turn that interrupted the reply
	next       int32                 // the next turn's index
	clientDone bool                  // the client half-closed
}

// Chat implements InferenceService.Chat. The handler goroutine owns the
// conversation; one goroutine receives client messages (receiveChat) and,
// per turn, one goroutine follows the reply (frontdoor.Door.Follow; turns
// never overlap, so one goroutine at a time calls Send).
func (s *Server) Chat(stream chatStream) error {
	if !s.door.HasChat() {
		return s.refuse(frontdoor.ErrNoChat)
	}
	c := &chatSession{s: s, ctx: stream.Context(), stream: stream}
	reqs := make(chan *inferencev1.ChatRequest)
	recvErr := make(chan error, 1)
	go receiveChat(c.ctx, stream, reqs, recvErr)
	for {
		var (
			doneC  <-chan frontdoor.Followed
			stallC <-chan time.Time
			reqC   = reqs
		)
		if c.reply != nil {
			doneC, stallC = c.reply.done, c.reply.stalled
		}
		if c.clientDone || c.pending != nil {
			reqC = nil // finish the interrupted reply before reading on
		}
		var (
			end bool
			err error
		)
		select {
		case m := <-reqC:
			err = c.request(m)
		case rerr := <-recvErr:
			recvErr = nil
			end, err = c.clientEnded(rerr)
		case res := <-doneC:
			end, err = c.replyDone(res)
		case <-stallC:
			err = errSlowReader
		}
		if err != nil {
			c.cancelReply()
			return Status(err)
		}
		if end {
			return nil
		}
	}
}

// receiveChat passes the client's messages to the handler until Recv
// fails (at the client's half-close, or when the handler returns, which
// ends the stream), then sends the error.
func receiveChat(ctx context.Context, stream chatStream, reqs chan<- *inferencev1.ChatRequest, recvErr chan<- error) {
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
}

// request handles one client message: a turn or a cancel. An error ends
// the stream.
func (c *chatSession) request(m *inferencev1.ChatRequest) error {
	switch r := m.GetRequest().(type) {
	case *inferencev1.ChatRequest_Turn:
		return c.turn(r.Turn)
	case *inferencev1.ChatRequest_Cancel:
		c.cancelReply()
		return nil
	}
	return reqErr(codes.InvalidArgument, ReasonInvalidParameter, "request", "empty chat request (want turn or cancel)")
}

// clientEnded handles the end of the client's messages: a half-close
// ends the stream once the reply (and an interrupting turn's) is done;
// anything else ends it at once.
func (c *chatSession) clientEnded(err error) (end bool, _ error) {
	if !errors.Is(err, io.EOF) {
		return false, err
	}
	c.clientDone = true
	return c.reply == nil && c.pending == nil, nil
}

// cancelReply cancels the streaming reply, if any; its Final follows.
func (c *chatSession) cancelReply() {
	if c.reply != nil {
		c.reply.st.Cancel()
	}
}

// turn starts t, or, while a reply streams, interrupts it: the reply
// ends (its partial text is kept) and t starts (or is refused) when it
// has.
func (c *chatSession) turn(t *inferencev1.ChatTurn) error {
	if c.reply != nil {
		c.reply.st.Cancel()
		c.pending = t
		return nil
	}
	return c.startOrRefuse(t)
}

// startOrRefuse starts t; a refused turn gets its TurnError (no reply is
// streaming, so this goroutine may Send) and the stream goes on. Only
// errors that end the stream are returned.
func (c *chatSession) startOrRefuse(t *inferencev1.ChatTurn) error {
	err := c.start(t)
	if err == nil {
		return nil
	}
	idx := c.next
	c.next++
	return c.refuseTurn(idx, err)
}

// refuseTurn sends turn idx's TurnError for err, counted as a refusal;
// an error that refuses no turn (turnError nil) is returned to end the
// stream.
func (c *chatSession) refuseTurn(idx int32, err error) error {
	c.s.metrics.rejected.WithLabelValues(rejectReason(err)).Inc()
	te := turnError(err)
	if te == nil {
		return err
	}
	return c.stream.Send(&inferencev1.ChatResponse{Turn: idx, Response: &inferencev1.ChatResponse_Error{Error: te}})
}

// start begins the reply to t, or returns why t is refused; a refused
// turn leaves the conversation as it was.
func (c *chatSession) start(t *inferencev1.ChatTurn) error {
	msgs, err := c.messages(t)
	if err != nil {
		return err
	}
	trunc := frontdoor.Reject
	if t.GetTruncation() == inferencev1.Truncation_TRUNCATION_DROP_OLDEST {
		trunc = frontdoor.DropOldest
	}
	keep := len(c.conv)
	tools, err := c.s.toolSpec(t)
	if err != nil {
		return turnFields(err, keep)
	}
	if err := frontdoor.CheckToolMessages(msgs, keep); err != nil {
		return turnFields(err, keep)
	}
	msgs, prompt, err := c.s.door.ChatPromptTools(c.ctx, msgs, keep, trunc, chat.Vars{}, tools)
	if err != nil {
		return turnFields(err, keep)
	}
	r, err := c.s.buildRequest(t.GetRequestId(), prompt, t, 0)
	if err != nil {
		return err
	}
	tc, err := c.s.door.ToolConstraint(tools)
	if err != nil {
		return turnFields(err, keep)
	}
	if tc != nil {
		if r.Sampling.Constraint != nil {
			return badField("turn.tool_choice", "%s cannot be combined with a response format", tools.Choice)
		}
		r.Sampling.Constraint = tc
	}
	st, err := c.s.cfg.Scheduler.Submit(c.ctx, r)
	if err != nil {
		return err
	}
	rep := &chatReply{st: st, done: make(chan frontdoor.Followed, 1), index: c.next, prev: c.conv,
		parsed: c.s.door.NewReply(tools, prompt, frontdoor.ReplyOptions{})}
	c.conv = msgs
	c.next++
	rep.stalled = c.s.door.Follow(c.ctx, st, c.s.follow(r, time.Now(), rep.done, c.send(rep)))
	c.reply = rep
	return nil
}

// messages is the conversation so far with t's messages after it,
// decoded from the wire.
func (c *chatSession) messages(t *inferencev1.ChatTurn) ([]chat.Message, error) {
	if len(t.GetMessages()) == 0 {
		return nil, badField("turn.messages", "a turn needs at least one message")
	}
	msgs := slices.Clip(c.conv)
	for i, m := range t.GetMessages() {
		name, ok := roleNames[m.GetRole()]
		if !ok {
			return nil, badField("turn.messages.role", "message %d has role %v", i, m.GetRole())
		}
		for _, f := range []struct{ field, s string }{
			{"content", m.GetContent()}, {"tool_call_id", m.GetToolCallId()}, {"reasoning_content", m.GetReasoningContent()},
		} {
			if !utf8.ValidString(f.s) {
				return nil, reqErr(codes.InvalidArgument, ReasonInvalidUTF8, "turn.messages."+f.field, "message %d is not valid UTF-8", i)
			}
		}
		msg := chat.Message{Role: name, Content: m.GetContent(), ReasoningContent: m.GetReasoningContent()}
		for _, tc := range m.GetToolCalls() {
			if !utf8.ValidString(tc.GetId()) || !utf8.ValidString(tc.GetName()) || !utf8.ValidString(tc.GetArguments()) {
				return nil, reqErr(codes.InvalidArgument, ReasonInvalidUTF8, "turn.messages.tool_calls", "message %d is not valid UTF-8", i)
			}
			msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{ID: tc.GetId(), Name: tc.GetName(), Arguments: tc.GetArguments()})
		}
		if name == "tool" {
			msg.ToolCallID = m.GetToolCallId()
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// send is the reply's send: chunks (their text kept for the
// conversation; with tools, parsed: Chunk.text the content, the reasoning
// and call deltas beside it), then the Final with the turn's load report
// (with tools, the complete calls and the finish reason they give).
func (c *chatSession) send(rep *chatReply) sendFunc {
	return func(ch *inferencev1.Chunk, f *inferencev1.Final, sf *scheduler.Final) error {
		if ch != nil {
			rep.text.WriteString(ch.Text)
		}
		if rep.parsed != nil {
			var evs []toolcall.Event
			if ch != nil {
				evs = rep.parsed.Push(ch.Text, len(ch.TokenIds))
			}
			if f != nil {
				evs = append(evs, rep.parsed.Finish()...)
			}
			if ch != nil || len(evs) > 0 {
				ch = parsedChunk(ch, evs)
			}
		}
		if ch != nil {
			if err := c.stream.Send(&inferencev1.ChatResponse{Turn: rep.index, Response: &inferencev1.ChatResponse_Chunk{Chunk: ch}}); err != nil {
				return err
			}
		}
		if f == nil {
			return nil
		}
		if rep.parsed != nil {
			c.parsedFinal(rep, f, sf)
		}
		return c.stream.Send(&inferencev1.ChatResponse{Turn: rep.index, Response: &inferencev1.ChatResponse_Final{Final: f},
			LoadReport: c.s.load.turnReport()})
	}
}

// replyDone handles the end of the reply: its text joins the
// conversation (a turn never admitted is refused instead, and the
// conversation is as it was); then the interrupting turn starts, or the
// stream ends if the client has half-closed.
func (c *chatSession) replyDone(res frontdoor.Followed) (end bool, _ error) {
	rep := c.reply
	c.reply = nil
	if errors.Is(res.Err, frontdoor.ErrQueueTimeout) {
		c.conv = rep.prev
		if err := c.refuseTurn(rep.index, res.Err); err != nil {
			return false, err
		}
	} else {
		msg := chat.Message{Role: "assistant", Content: rep.text.String()}
		if rep.parsed != nil && rep.parseErr == nil {
			msg = rep.parsed.Message()
		}
		c.conv = append(c.conv, msg)
		if res.Err != nil {
			return false, res.Err
		}
	}
	if c.pending != nil {
		t := c.pending
		c.pending = nil
		return false, c.startOrRefuse(t)
	}
	return c.clientDone, nil
}
