package frontdoor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

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
	return d.chatPrompt(ctx, msgs, keep, trunc, v, nil)
}

// rewrite turns a conversation and its variables into what the template
// renders (ChatPromptTools' tools); nil renders them as they are.
type rewrite func(msgs []chat.Message, v chat.Vars) ([]chat.Message, chat.Vars)

// chatPrompt is ChatPromptVars with each try's messages rewritten by rw
// before rendering.
func (d *Door) chatPrompt(ctx context.Context, msgs []chat.Message, keep int, trunc Truncation, v chat.Vars, rw rewrite) ([]chat.Message, []int32, error) {
	if d.cfg.Chat == nil {
		return nil, nil, ErrNoChat
	}
	prompt, err := d.chatTry(ctx, msgs, v, rw)
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
	bestPrompt, err := d.chatTry(ctx, without(units), v, rw)
	if err != nil {
		return nil, nil, err // it does not fit even with all of them gone
	}
	best, lo := units, 0 // without(lo) does not fit; without(best) does
	for best-lo > 1 {
		mid := (lo + best) / 2
		p, err := d.chatTry(ctx, without(mid), v, rw)
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

// chatTry renders and tokenizes msgs (rewritten by rw, when not nil),
// refusing them when they do not fit (bytes before tokenizing, then
// tokens).
func (d *Door) chatTry(ctx context.Context, msgs []chat.Message, v chat.Vars, rw rewrite) ([]int32, error) {
	prompt, err := d.chatRender(ctx, msgs, v, rw, true)
	if err != nil {
		return nil, err
	}
	if err := d.cfg.Limits.CheckPrompt(len(prompt)); err != nil {
		return nil, err
	}
	return prompt, nil
}

// chatRender renders and tokenizes msgs (rewritten by rw, when not nil),
// their bytes bounded before tokenizing; the tokens are not bounded.
func (d *Door) chatRender(ctx context.Context, msgs []chat.Message, v chat.Vars, rw rewrite, addGenerationPrompt bool) ([]int32, error) {
	if rw != nil {
		msgs, v = rw(msgs, v)
	}
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
	if err := d.checkMarkupText(msgs, v); err != nil {
		return nil, err
	}
	var parts []chat.Segment
	var err error
	if vr, ok := d.cfg.Chat.(varsRenderer); ok {
		parts, err = vr.RenderSegmentsVars(msgs, addGenerationPrompt, v)
	} else if v.Tools != nil || v.EnableThinking != nil || v.ReasoningEffort != "" || v.Extra != nil {
		return nil, errors.New("frontdoor: the chat renderer takes no template variables")
	} else {
		parts, err = d.cfg.Chat.RenderSegments(msgs, addGenerationPrompt)
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
	return prompt, nil
}

// controlFinder is optionally implemented by a Tokenizer that can say
// whether a text holds a control token's text (*tokenizer.Tokenizer does).
type controlFinder interface {
	ControlTextIn(text string) (string, bool)
}

// ErrControlText is wrapped by MarkupError.
var ErrControlText = errors.New("holds the text of a control token")

// MarkupError is a client's text that the template writes as its own
// markup (not as a marked message content) holding a control token's
// text. It wraps ErrControlText; doors answer it as an invalid field.
type MarkupError struct {
	Field string // the request's field, e.g. "messages[1].tool_calls[0].id"
	Token string // the control token's text found in it
}

func (e *MarkupError) Error() string { return e.Field + ": " + e.Detail() }

// Detail is the message without the field name.
func (e *MarkupError) Detail() string {
	return fmt.Sprintf("holds the text of the control token %q, which only message contents may carry", e.Token)
}

// Unwrap returns ErrControlText.
func (e *MarkupError) Unwrap() error { return ErrControlText }

// checkMarkupText refuses client text that reaches the prompt as template
// markup rather than as marked message contents (tool calls' ids, names
// and arguments, tool messages' ids and names, tool definitions and the
// template variables) when it holds a control token's text: tokenized with
// the template's text, it would become that token, and a client could
// close a turn or open another role's. Message and reasoning contents
// need no check: they are tokenized as data.
func (d *Door) checkMarkupText(msgs []chat.Message, v chat.Vars) error {
	cf, ok := d.cfg.Tokenizer.(controlFinder)
	if !ok {
		return nil
	}
	check := func(field, text string) error {
		if text == "" {
			return nil
		}
		if tok, found := cf.ControlTextIn(text); found {
			return &MarkupError{Field: field, Token: tok}
		}
		// JSON text reaches the template decoded (a template re-encodes it
		// with | tojson): its strings' escapes (\u003c) are undone there.
		for _, str := range jsonStrings(text) {
			if tok, found := cf.ControlTextIn(str); found {
				return &MarkupError{Field: field, Token: tok}
			}
		}
		return nil
	}
	for i, m := range msgs {
		for j, c := range m.ToolCalls {
			f := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
			for _, e := range []error{check(f+".id", c.ID), check(f+".function.name", c.Name), check(f+".function.arguments", c.Arguments)} {
				if e != nil {
					return e
				}
			}
		}
		if err := check(fmt.Sprintf("messages[%d].tool_call_id", i), m.ToolCallID); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("messages[%d].name", i), m.Name); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("messages[%d].role", i), m.Role); err != nil {
			return err
		}
	}
	for i, t := range v.Tools {
		// A tool definition is JSON: check its decoded strings too.
		if err := check(fmt.Sprintf("tools[%d]", i), string(t)); err != nil {
			return err
		}
	}
	for i, b := range v.BuiltinTools {
		if err := check(fmt.Sprintf("builtin_tools[%d]", i), b); err != nil {
			return err
		}
	}
	if err := check("reasoning_effort", v.ReasoningEffort); err != nil {
		return err
	}
	if err := check("date_string", v.DateString); err != nil {
		return err
	}
	for k, x := range v.Extra {
		if err := check("chat_template_kwargs."+k, k+" "+string(x)); err != nil {
			return err
		}
	}
	return nil
}

// jsonStrings returns the strings (object keys included) of text when it
// is JSON, else nil.
func jsonStrings(text string) []string {
	dec := json.NewDecoder(strings.NewReader(text))
	var out []string
	for {
		tok, err := dec.Token()
		if err != nil {
			if err == io.EOF {
				return out
			}
			return nil
		}
		if s, ok := tok.(string); ok {
			out = append(out, s)
		}
	}
}
