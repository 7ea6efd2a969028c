package toolcall

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
)

// Kind says what an Event carries.
type Kind uint8

const (
	// Content is a delta of the answer shown to the user (Text).
	Content Kind = iota + 1
	// Reasoning is a delta of the model's reasoning (Text).
	Reasoning
	// CallStart opens tool call Index with its ID and Name. It always comes
	// before the call's first CallArgs.
	CallStart
	// CallArgs is a fragment (Text) of call Index's arguments. The fragments
	// of one call, concatenated, are exactly its arguments: one JSON object.
	CallArgs
	// CallEnd closes call Index: its arguments are complete and parse.
	CallEnd
	// CallFailed says the output broke the format (Err is a *CallError).
	// Nothing follows it: the parser stops reading.
	CallFailed
)

func (k Kind) String() string {
	switch k {
	case Content:
		return "content"
	case Reasoning:
		return "reasoning"
	case CallStart:
		return "call-start"
	case CallArgs:
		return "call-args"
	case CallEnd:
		return "call-end"
	case CallFailed:
		return "call-failed"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is one piece of a parsed reply. Which fields are set depends on
// Kind.
type Event struct {
	Kind  Kind
	Text  string // Content, Reasoning, CallArgs
	Index int    // CallStart, CallArgs, CallEnd, CallFailed: the call's 0-based index in the reply
	ID    string // CallStart
	Name  string // CallStart
	Err   error  // CallFailed
}

// CallError is a tool call the model began but did not write correctly:
// malformed, or cut off by the end of the output (max_tokens, a stop
// string). The call's CallStart and some CallArgs may already have been
// sent; its CallEnd never is.
type CallError struct {
	Index     int    // the call's index (the one it would have had, when it failed before its CallStart)
	Name      string // the tool's name when it was read, else ""
	Truncated bool   // the output ended inside the call
	Reason    string // what was wrong
	Near      string // up to 64 bytes of output at the failure
}

func (e *CallError) Error() string {
	what := "malformed"
	if e.Truncated {
		what = "truncated"
	}
	name := ""
	if e.Name != "" {
		name = " (" + e.Name + ")"
	}
	return fmt.Sprintf("toolcall: call %d%s %s: %s near %q", e.Index, name, what, e.Reason, e.Near)
}

// Tool is what the parser needs to know of a tool the request offered.
type Tool struct {
	Name string
	// Parameters is the tool's JSON Schema. Formats that write arguments as
	// text (Qwen3-Coder's XML) read each property's "type" from it to turn
	// the text back into JSON; the others ignore it.
	Parameters json.RawMessage
}

// Options tune a Parser. The zero value parses calls and reasoning, with
// the reply starting outside any reasoning block.
type Options struct {
	// RawReasoning leaves reasoning where the model wrote it: its markers
	// and text go to Content untouched, and no Reasoning event is sent.
	RawReasoning bool
	// InReasoning says the prompt already opened the reasoning block (the
	// generation prompt ends in "<think>", as Qwen3 with thinking on, QwQ
	// and the DeepSeek R1 distills do), so the reply starts inside it. See
	// OpensReasoning.
	InReasoning bool
	// Tools are the request's tools; Qwen3-Coder reads their schemas.
	Tools []Tool
	// NewID makes tool-call ids. Nil means "call_" and 24 random letters and
	// digits (for FormatMistral, 9 letters and digits: its template accepts
	// nothing else).
	NewID func() string
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return string(b)
}
