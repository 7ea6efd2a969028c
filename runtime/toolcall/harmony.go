package toolcall

import "strings"

// Harmony (gpt-oss). The generation prompt ends with <|start|>assistant, so
// the reply starts with a message header; messages follow one another:
//
//	<|channel|>analysis<|message|>...<|end|>                    reasoning
//	<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
//	<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}<|call|>
//	<|start|>assistant<|channel|>final<|message|>...<|return|>  content
//
// The header is everything before <|message|>: its channel follows
// <|channel|>, its recipient follows "to=" (before or after the channel, as
// the template writes it). A message with a recipient is a call to it (the
// "functions." namespace dropped from the name), its body the arguments'
// JSON; a commentary message without one is a preamble meant for the user,
// so content, as final is. A message ends at <|end|>, <|call|> or
// <|return|> (the last two stop generation, so the output may also just
// end). All markers are special tokens and count wherever they appear. A
// reply that does not start with a header is content. With RawReasoning the
// analysis channel's text goes to content (its markers, special tokens, are
// dropped as for every channel).

const (
	hStart   = "<|start|>"
	hChannel = "<|channel|>"
	hMessage = "<|message|>"
	hEnd     = "<|end|>"
	hCall    = "<|call|>"
	hReturn  = "<|return|>"
)

func (p *Parser) harmonyStart() state {
	return func(final bool) bool {
		p.skipSpace() // whitespace before the first header is nobody's
		b := p.buf
		if b == "" && !final {
			return false
		}
		for _, m := range []string{hStart, hChannel, " to=", "to="} {
			full, partial := prefixOf(b, m)
			if partial && !final {
				return false
			}
			if full {
				p.state = p.harmonyNext()
				return true
			}
		}
		p.state = p.text(Content, false, nil)
		return true
	}
}

// harmonyNext reads the next message's header.
func (p *Parser) harmonyNext() state {
	return func(final bool) bool {
		if !p.skipSpace() {
			return false // the reply may end between messages
		}
		if i := strings.Index(p.buf, hMessage); i >= 0 && i <= maxHeader {
			header := p.buf[:i]
			p.consume(i + len(hMessage))
			p.state = p.harmonyBody(header)
			return true
		}
		switch {
		case len(p.buf) > maxHeader+len(hMessage):
			return p.fail("message header too long or "+hMessage+" missing", false)
		case !final:
			return false
		case strings.Contains(p.buf, "to="):
			return p.fail("output ended inside a call's header", true)
		}
		// Cut off in the header of a message that is not a call: there is
		// nothing of it to send.
		p.consume(len(p.buf))
		return false
	}
}

// maxHeader bounds a message header.
const maxHeader = 512

// harmonyBody reads a message's body once its header is known.
func (p *Parser) harmonyBody(header string) state {
	header = strings.TrimPrefix(strings.TrimSpace(header), hStart)
	channel, recipient := "", ""
	if i := strings.Index(header, hChannel); i >= 0 {
		channel = headerWord(header[i+len(hChannel):])
	}
	if i := strings.Index(header, "to="); i >= 0 {
		recipient = headerWord(header[i+len("to="):])
	}
	if recipient != "" && recipient != "assistant" && recipient != "user" {
		name := strings.TrimPrefix(recipient, "functions.")
		if !validName(name) {
			return p.failed1("invalid tool name " + quote(name))
		}
		return p.argsValue(p.startCall(name), func() state {
			return p.optional(hCall, p.harmonyNext)
		})
	}
	kind := Content
	if channel == "analysis" && !p.opts.RawReasoning {
		kind = Reasoning
	}
	next := func() state { return p.harmonyNext() }
	return p.text(kind, false, []trigger{
		{marker: hEnd, next: next},
		{marker: hCall, next: next},
		{marker: hReturn, next: next},
		{marker: hStart, next: func() state { p.buf = hStart + p.buf; return p.harmonyNext() }},
		{marker: hChannel, next: func() state { p.buf = hChannel + p.buf; return p.harmonyNext() }},
	})
}

// headerWord returns the word s starts with: up to a space or a marker.
func headerWord(s string) string {
	s = strings.TrimLeft(s, " ")
	if i := strings.IndexAny(s, " <"); i >= 0 {
		s = s[:i]
	}
	return s
}
