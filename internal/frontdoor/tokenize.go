package frontdoor

import (
	"context"
	"unicode/utf8"

	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/scheduler"
)

// UTF8Error is a text that is not valid UTF-8. It wraps
// scheduler.ErrInvalidRequest.
type UTF8Error struct {
	Field string // the text's field (the caller's name)
}

func (e *UTF8Error) Error() string { return e.Field + ": not valid UTF-8" }

// Unwrap returns scheduler.ErrInvalidRequest.
func (e *UTF8Error) Unwrap() error { return scheduler.ErrInvalidRequest }

// Tokenize is the tokens of text, the tokenizing every door's tokenize
// endpoint serves (gRPC Tokenize, HTTP /tokenize): text must be valid
// UTF-8 (a *UTF8Error naming field) and at most MaxPromptBytes (a
// *BytesError), and is tokenized under the concurrency bound. addSpecial
// adds the special tokens (BOS) a prompt gets; parseSpecial turns the
// text of control tokens into those tokens.
func (d *Door) Tokenize(ctx context.Context, field, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	if !utf8.ValidString(text) {
		return nil, &UTF8Error{Field: field}
	}
	if err := d.CheckPromptBytes(field, len(text)); err != nil {
		return nil, err
	}
	return d.Encode(ctx, text, addSpecial, parseSpecial)
}

// Detokenize is the text of ids (every door's detokenize endpoint). An id
// outside the vocabulary is a *scheduler.LimitError naming field (wrapping
// scheduler.ErrTokenOutOfRange, as a prompt's would be).
func (d *Door) Detokenize(field string, ids []int32) (string, error) {
	vocab := d.cfg.Tokenizer.VocabSize()
	for _, t := range ids {
		if t < 0 || int(t) >= vocab {
			return "", &scheduler.LimitError{Field: field, What: "token id", Op: "<", Limit: vocab, Got: int(t),
				Err: scheduler.ErrTokenOutOfRange}
		}
	}
	return d.cfg.Tokenizer.Decode(ids), nil
}

// ChatTokens is the prompt a chat request with msgs gets (ChatPrompt
// without truncation: the template's text, the contents as plain text,
// BOS where the model wants one and the template writes none), for a
// tokenize endpoint; calls and results in msgs are rendered as
// ChatPromptTools renders them without tools. Without the generation
// prompt, the conversation is rendered as it stands (the template does not
// open the assistant's turn).
func (d *Door) ChatTokens(ctx context.Context, msgs []chat.Message, addGenerationPrompt bool) ([]int32, error) {
	if d.cfg.Chat == nil {
		return nil, ErrNoChat
	}
	return d.chatRender(ctx, msgs, chat.Vars{}, d.toolRewrite(nil), addGenerationPrompt)
}
