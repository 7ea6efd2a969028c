package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/toolcall"
	"github.com/weft-inference/weft/scheduler"
)

// Tool calling on Chat: the turn's tools and tool choice are decoded here
// and checked, rendered, enforced and parsed by frontdoor (ToolSpec,
// CheckToolMessages, ChatPromptTools, ToolConstraint, Reply), as on the
// OpenAI door.

// toolSpec decodes t's tools, tool_choice and parallel_tool_calls and has
// the Door check them; nil when t has no tools.
func (s *Server) toolSpec(t *inferencev1.ChatTurn) (*frontdoor.ToolSpec, error) {
	defs := make([]frontdoor.ToolDef, len(t.GetTools()))
	for i, tl := range t.GetTools() {
		for _, f := range []struct{ field, s string }{
			{"name", tl.GetName()}, {"description", tl.GetDescription()}, {"parameters", tl.GetParameters()},
		} {
			if !utf8.ValidString(f.s) {
				return nil, reqErr(codes.InvalidArgument, ReasonInvalidUTF8, fmt.Sprintf("turn.tools[%d].%s", i, f.field), "not valid UTF-8")
			}
		}
		defs[i] = frontdoor.ToolDef{Name: tl.GetName(), Description: tl.GetDescription()}
		if p := tl.GetParameters(); p != "" {
			defs[i].Parameters = json.RawMessage(p)
		}
	}
	choice, named := frontdoor.ToolChoiceAuto, ""
	switch c := t.GetToolChoice().GetChoice().(type) {
	case *inferencev1.ToolChoice_Mode:
		switch c.Mode {
		case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_UNSPECIFIED, inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO:
		case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE:
			choice = frontdoor.ToolChoiceNone
		case inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED:
			choice = frontdoor.ToolChoiceRequired
		default:
			return nil, badField("turn.tool_choice.mode", "unknown value %d", c.Mode)
		}
	case *inferencev1.ToolChoice_Function:
		if !utf8.ValidString(c.Function) {
			return nil, reqErr(codes.InvalidArgument, ReasonInvalidUTF8, "turn.tool_choice.function", "not valid UTF-8")
		}
		choice, named = frontdoor.ToolChoiceNamed, c.Function
	}
	parallel := t.ParallelToolCalls == nil || *t.ParallelToolCalls
	return s.door.ToolSpec(defs, choice, named, parallel)
}

// fieldIndex splits a frontdoor field name "messages[3].rest" or
// "tools[1].rest" into its list, index and rest.
var fieldIndex = regexp.MustCompile(`^(messages|tools)\[(\d+)\](.*)$`)

// turnField renames a frontdoor field (OpenAI's names, its messages
// counted over the whole conversation) to the ChatTurn's: tools[1].function.name
// is turn.tools[1].name, messages[keep+2].tool_calls[0].function.arguments
// is turn.messages[2].tool_calls[0].arguments; a message of the
// conversation before the turn keeps its conversation index.
func turnField(f string, keep int) string {
	m := fieldIndex.FindStringSubmatch(f)
	if m == nil {
		return "turn." + f
	}
	rest := strings.ReplaceAll(m[3], ".function.", ".")
	i, _ := strconv.Atoi(m[2])
	if m[1] == "messages" {
		if i < keep {
			return fmt.Sprintf("conversation[%d]%s", i, rest)
		}
		i -= keep
	}
	return fmt.Sprintf("turn.%s[%d]%s", m[1], i, rest)
}

// turnFields gives frontdoor's field errors of a turn (*FieldError,
// *MarkupError) the turn's field names; other errors pass unchanged.
func turnFields(err error, keep int) error {
	var fe *frontdoor.FieldError
	var me *frontdoor.MarkupError
	switch {
	case errors.As(err, &fe):
		return badField(turnField(fe.Field, keep), "%s", fe.Msg)
	case errors.As(err, &me):
		return &frontdoor.MarkupError{Field: turnField(me.Field, keep), Token: me.Token}
	}
	return err
}

// parsedChunk is ch (nil: a chunk without tokens) with its text replaced
// by the parsed reply's events: content in text, reasoning in
// reasoning_text, call deltas in tool_calls.
func parsedChunk(ch *inferencev1.Chunk, evs []toolcall.Event) *inferencev1.Chunk {
	if ch == nil {
		ch = &inferencev1.Chunk{}
	}
	var content, reasoning strings.Builder
	ch.ToolCalls = nil
	for _, ev := range evs {
		switch ev.Kind {
		case toolcall.Content:
			content.WriteString(ev.Text)
		case toolcall.Reasoning:
			reasoning.WriteString(ev.Text)
		case toolcall.CallStart:
			ch.ToolCalls = append(ch.ToolCalls, &inferencev1.ToolCallDelta{Index: int32(ev.Index), Id: ev.ID, Name: ev.Name})
		case toolcall.CallArgs:
			ch.ToolCalls = append(ch.ToolCalls, &inferencev1.ToolCallDelta{Index: int32(ev.Index), Arguments: ev.Text})
		}
	}
	ch.Text, ch.ReasoningText = content.String(), reasoning.String()
	return ch
}

// parsedFinal completes the Final f of a parsed reply (Finish called):
// its calls, its reasoning tokens, and FINISH_REASON_TOOL_CALLS when it
// stopped after complete calls; a call the model broke is
// FINISH_REASON_ERROR with the parser's reason (the stream goes on, the
// conversation keeps the reply's text as it was generated).
func (c *chatSession) parsedFinal(rep *chatReply, f *inferencev1.Final, sf *scheduler.Final) {
	f.GetUsage().ReasoningTokens = int32(rep.parsed.ReasoningTokens)
	if sf.Reason == scheduler.FinishCancelled || sf.Reason == scheduler.FinishError {
		return
	}
	calls, err := rep.parsed.Outcome(sf)
	if err != nil {
		rep.parseErr = err
		c.s.log.WarnContext(c.ctx, "chat: malformed tool call", "request", f.GetRequestId(), "err", err)
		f.FinishReason, f.ErrorMessage = inferencev1.FinishReason_FINISH_REASON_ERROR, err.Error()
		return
	}
	for _, tc := range rep.parsed.Calls() {
		f.ToolCalls = append(f.ToolCalls, &inferencev1.ToolCall{Id: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	if calls {
		f.FinishReason = inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS
	}
}
