package frontdoor

import (
	"context"
	"errors"

	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/tokenizer"
	"github.com/weft-inference/weft/scheduler"
)

// Truncation says what ChatPrompt does with a conversation that does not
// fit (its bytes over MaxPromptBytes, or its tokens over the context).
type Truncation int

const (
	// Reject refuses it: the error of the bound it broke.
	Reject Truncation = iota
	// DropOldest drops the fewest oldest droppable messages of the
	// conversation so far that make it fit.
	DropOldest
)

// ChatPrompt renders and tokenizes msgs, whose first keep messages are the
// conversation so far and the rest the new turn. Message contents are
// tokenized as plain text (they never produce control tokens); only the
// template's own text does. A conversation over MaxPromptBytes (its
// contents summed, then the rendered prompt: a *BytesError) or the context
// (Limits.CheckPrompt's *scheduler.LimitError) is refused or, with
// DropOldest, loses the fewest oldest non-system messages of the
// conversation so far (an assistant reply goes with the message before it)
// that make it fit, found by bisection (a logarithmic number of renders); a
// turn that does not fit even without them is refused. It returns the
// conversation as sent and its prompt.
func (d *Door) ChatPrompt(ctx context.Context, msgs []chat.Message, keep int, trunc Truncation) ([]chat.Message, []int32, error) {
	return d.ChatPromptVars(ctx, msgs, keep, trunc, chat.Vars{})
}

// ChatPromptVars is ChatPrompt with template variables (tools,
// enable_thinking...): v goes to the renderer's RenderSegmentsVars. A
// renderer without it (only RenderSegments) renders a zero v only; any
// other is an error.
func (d *Door) ChatPromptVars(ctx context.Context, msgs []chat.Message, keep int, trunc Truncation, v chat.Vars) ([]chat.Message, []int32, error) {
	if d.cfg.Chat == nil {
		return nil, nil, ErrNoChat
	}
	prompt, err := d.chatTry(ctx, msgs, v)
	if err == nil || trunc != DropOldest || !TooLong(err) {
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
	without := func(n int) []chat.Message { // msgs less the n oldest units
		out := make([]chat.Message, 0, len(msgs))
		for i, m := range msgs {
			if i >= keep || unit[i] < 0 || unit[i] >= n {
				out = append(out, m)
			}
		}
		return out
	}
	if units == 0 {
		return nil, nil, err
	}
	bestPrompt, err := d.chatTry(ctx, without(units), v)
	if err != nil {
		return nil, nil, err // it does not fit even with all of them gone
	}
	best, lo := units, 0 // without(lo) does not fit; without(best) does
	for best-lo > 1 {
		mid := (lo + best) / 2
		p, err := d.chatTry(ctx, without(mid), v)
		switch {
		case err == nil:
			best, bestPrompt = mid, p
		case TooLong(err):
			lo = mid
		default:
			return nil, nil, err
		}
	}
	return without(best), bestPrompt, nil
}

// TooLong reports whether err refuses a prompt for its length: its bytes
// (*BytesError) or its tokens (scheduler.ErrPromptTooLong).
func TooLong(err error) bool {
	return errors.Is(err, ErrPromptBytes) || errors.Is(err, scheduler.ErrPromptTooLong)
}

// chatTry renders and tokenizes msgs, refusing them when they do not fit
// (bytes before tokenizing, then tokens).
func (d *Door) chatTry(ctx context.Context, msgs []chat.Message, v chat.Vars) ([]int32, error) {
	n := 0
	for _, m := range msgs {
		n += len(m.Content) + len(m.ReasoningContent)
		for _, c := range m.ToolCalls {
			n += len(c.Arguments)
		}
	}
	for _, t := range v.Tools {
		n += len(t)
	}
	if err := d.CheckPromptBytes(FieldChatContents, n); err != nil {
		return nil, err
	}
	var parts []chat.Segment
	var err error
	if vr, ok := d.cfg.Chat.(varsRenderer); ok {
		parts, err = vr.RenderSegmentsVars(msgs, true, v)
	} else if v.Tools != nil || v.EnableThinking != nil || v.ReasoningEffort != "" || v.Extra != nil {
		return nil, errors.New("frontdoor: the chat renderer takes no template variables")
	} else {
		parts, err = d.cfg.Chat.RenderSegments(msgs, true)
	}
	if err != nil {
		return nil, &TemplateError{Err: err}
	}
	segs := make([]tokenizer.Segment, len(parts))
	rendered := 0
	for i, p := range parts {
		segs[i] = tokenizer.Segment{Text: p.Text, ParseSpecial: !p.Content}
		rendered += len(p.Text)
	}
	// The template's own text counts too (many empty messages render to
	// much markup): the whole prompt is bounded before tokenizing.
	if err := d.CheckPromptBytes(FieldChatPrompt, rendered); err != nil {
		return nil, err
	}
	prompt, err := d.EncodeSegments(ctx, segs, false)
	if err != nil {
		return nil, err
	}
	if bt, ok := d.cfg.Tokenizer.(bosTokenizer); ok && bt.AddBOS() && (len(prompt) == 0 || prompt[0] != bt.BOS()) {
		prompt = append([]int32{bt.BOS()}, prompt...)
	}
	if err := d.cfg.Limits.CheckPrompt(len(prompt)); err != nil {
		return nil, err
	}
	return prompt, nil
}
