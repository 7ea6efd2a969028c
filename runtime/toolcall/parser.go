package toolcall

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// state is one step of a format's state machine. It looks at p.buf and
// either consumes some of it (emitting events) or changes state, and then
// returns true; or it returns false because it cannot decide without more
// text. With final set there is no more text: a state must then consume
// what it can decide and fail otherwise.
type state func(final bool) bool

// Parser turns one reply, fed in pieces, into events. It is not safe for
// concurrent use; each stream has its own.
type Parser struct {
	format Format
	opts   Options
	newID  func() string
	tools  map[string]Tool
	props  map[string]map[string]propSchema // tool -> property -> schema, read once
	mode   Kind                             // Content, Reasoning or CallArgs: what the text pushed last is

	buf   string // text pushed but not yet consumed
	out   []Event
	state state
	calls int    // calls started so far
	open  int    // the open call's index, or -1
	name  string // the open call's name

	argsTail string // the start of a rune split across argument fragments

	failed   bool
	err      error
	finished bool

	// Text-mode position, for the markers' placement rules.
	lineStart bool // the next byte starts a line
	sawText   bool // the reply has had content (not only whitespace) or a call
	inFence   bool // inside a ``` code fence
}

// NewParser returns a parser for one reply written in format f.
func NewParser(f Format, opts Options) *Parser {
	p := &Parser{format: f, opts: opts, newID: opts.NewID, lineStart: true, open: -1}
	if p.newID == nil {
		if f == FormatMistral {
			p.newID = func() string { return randomID(9) }
		} else {
			p.newID = func() string { return "call_" + randomID(24) }
		}
	}
	if len(opts.Tools) > 0 {
		p.tools = make(map[string]Tool, len(opts.Tools))
		for _, t := range opts.Tools {
			p.tools[t.Name] = t
		}
	}
	p.state = p.initial()
	return p
}

// Push feeds the next piece of the reply and returns the events it
// completes. Markers may be split across pieces at any byte: text that may
// still turn out to be a marker is held until it can be decided.
func (p *Parser) Push(text string) []Event {
	if p.finished || p.failed {
		return nil
	}
	p.buf += text
	p.run(false)
	return p.take()
}

// Finish says the reply ended and returns the last events. The error is
// the first *CallError of the reply (also sent as a CallFailed event), or
// nil.
func (p *Parser) Finish() ([]Event, error) {
	if p.finished {
		return nil, p.err
	}
	if !p.failed {
		p.run(true)
		if !p.failed && p.buf != "" {
			// A state that cannot consume its input at the end must fail;
			// reaching here is a bug in a format's state machine.
			p.fail("unparsed output at the end", true)
		}
	}
	p.finished = true
	return p.take(), p.err
}

// Reasoning reports whether the text pushed so far ends inside reasoning,
// for a door that counts reasoning tokens (completion_tokens_details): a
// token whose text leaves the parser here counts as reasoning. Markers
// count with the block they open or close.
func (p *Parser) Reasoning() bool { return p.mode == Reasoning }

func (p *Parser) run(final bool) {
	for !p.failed && p.state(final) {
	}
}

func (p *Parser) take() []Event {
	out := p.out
	p.out = nil
	return out
}

// consume drops the first n bytes of the buffer.
func (p *Parser) consume(n int) {
	if n > 0 {
		p.lineStart = p.buf[n-1] == '\n'
		p.buf = p.buf[n:]
	}
}

// emit sends a Content or Reasoning delta, merged into the previous event
// when that is of the same kind.
func (p *Parser) emit(k Kind, s string) {
	if s == "" {
		return
	}
	if k == Content && !p.sawText && strings.TrimLeft(s, " \t\r\n") != "" {
		p.sawText = true
	}
	if n := len(p.out); n > 0 && p.out[n-1].Kind == k {
		p.out[n-1].Text += s
		return
	}
	p.out = append(p.out, Event{Kind: k, Text: s})
}

// startCall opens a call and returns its index.
func (p *Parser) startCall(name string) int {
	i := p.calls
	p.calls++
	p.open, p.name = i, name
	p.mode = CallArgs
	p.sawText = true
	p.out = append(p.out, Event{Kind: CallStart, Index: i, ID: p.newID(), Name: name})
	return i
}

func (p *Parser) callArgs(i int, s string) {
	// Hold a rune split across pieces until its last byte comes.
	if p.argsTail != "" {
		s = p.argsTail + s
	}
	n := runeSafe(s)
	s, p.argsTail = s[:n], s[n:]
	if s == "" {
		return
	}
	if n := len(p.out); n > 0 && p.out[n-1].Kind == CallArgs && p.out[n-1].Index == i {
		p.out[n-1].Text += s
		return
	}
	p.out = append(p.out, Event{Kind: CallArgs, Index: i, Text: s})
}

func (p *Parser) endCall(i int) {
	if p.argsTail != "" {
		tail := p.argsTail
		p.argsTail = ""
		p.out = append(p.out, Event{Kind: CallArgs, Index: i, Text: tail})
	}
	p.out = append(p.out, Event{Kind: CallEnd, Index: i})
	p.open, p.name = -1, ""
}

// fail stops the parser with a CallError for the call being read (the open
// one, or the next one when it has not opened yet). truncated says the
// output ended before the call did. It returns false, for states to return.
func (p *Parser) fail(reason string, truncated bool) bool {
	index, name := p.open, p.name
	if index < 0 {
		index = p.calls
	}
	near := p.buf
	if len(near) > 64 {
		near = near[:64]
	}
	err := &CallError{Index: index, Name: name, Truncated: truncated, Reason: reason, Near: near}
	p.failed = true
	p.err = err
	p.out = append(p.out, Event{Kind: CallFailed, Index: index, Err: err})
	return false
}

// prefixOf reports whether s starts with m (full), or is a proper, non-empty
// prefix of m (partial: more text may complete it).
func prefixOf(s, m string) (full, partial bool) {
	if len(s) >= len(m) {
		return s[:len(m)] == m, false
	}
	return false, s != "" && m[:len(s)] == s
}

// expect consumes marker m at the start of the buffer, after optional
// whitespace when skipSpace. It returns ok when consumed, wait when more
// text is needed, and neither when the buffer does not start with m.
func (p *Parser) expect(m string, skipSpace, final bool) (ok, wait bool) {
	b := p.buf
	i := 0
	if skipSpace {
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		if i == len(b) && !final {
			return false, true
		}
	}
	full, partial := prefixOf(b[i:], m)
	if full {
		p.consume(i + len(m))
		return true, false
	}
	return false, partial && !final
}

// skipSpace consumes leading whitespace and reports whether the buffer
// still holds something.
func (p *Parser) skipSpace() bool {
	i := 0
	for i < len(p.buf) && isSpace(p.buf[i]) {
		i++
	}
	p.consume(i)
	return p.buf != ""
}

// where a marker counts in text.
type where uint8

const (
	anywhere   where = iota // wherever it appears (special tokens the tokenizer never makes from plain text)
	lineStart               // at the start of a line outside a ``` code fence
	replyStart              // before any content or call of the reply (whitespace and reasoning aside)
)

// trigger is a marker that ends a run of text and what follows it.
type trigger struct {
	marker string
	at     where
	// next is the state after the marker (consumed by then).
	next func() state
	// seq, when set, replaces marker: the trigger is this sequence of
	// tokens with optional whitespace between them, and it is not consumed
	// (next reads it again). marker then holds seq's first token.
	seq []string
}

// match reports whether s starts with the trigger (full, with the bytes to
// consume) or may once more text comes (partial).
func (t *trigger) match(s string) (n int, full, partial bool) {
	if t.seq == nil {
		full, partial = prefixOf(s, t.marker)
		return len(t.marker), full, partial
	}
	full, partial = seqPrefix(s, t.seq)
	return 0, full, partial
}

// seqPrefix is prefixOf for a sequence of tokens with optional whitespace
// before each but the first.
func seqPrefix(s string, toks []string) (full, partial bool) {
	for k, tok := range toks {
		if k > 0 {
			for s != "" && isSpace(s[0]) {
				s = s[1:]
			}
			if s == "" {
				return false, true
			}
		}
		f, part := prefixOf(s, tok)
		if !f {
			return false, part
		}
		s = s[len(tok):]
	}
	return true, false
}

// textMode reads Content or Reasoning text until one of its triggers.
// Whitespace right before a trigger is dropped, and so is whitespace at the
// start when trim is set (text after a reasoning block or a call):
// templates put newlines around blocks that belong to neither side.
func (p *Parser) text(kind Kind, trim bool, triggers []trigger) state {
	p.lineStart = true
	p.mode = kind
	var first [256]bool
	for _, t := range triggers {
		first[t.marker[0]] = true
	}
	fence := kind == Content
	for _, t := range triggers {
		if t.at == lineStart {
			first['`'] = fence
		}
	}
	var ws []byte // whitespace held before the next text
	out := func(t string) {
		if t == "" {
			return
		}
		if len(ws) > 0 {
			t = string(ws) + t
			ws = ws[:0]
		}
		p.emit(kind, t)
	}
	return func(final bool) bool {
		b := p.buf
		if trim {
			i := 0
			for i < len(b) && isSpace(b[i]) {
				i++
			}
			if i == len(b) && !final {
				p.consume(i)
				return false
			}
			if i > 0 {
				p.consume(i)
				b = p.buf
			}
			trim = false
		}
		hold := len(b) // bytes from hold on wait for more text
		var fire *trigger
		at, fireN := -1, 0
		lead := len(b) - len(strings.TrimLeft(b, " \t\r\n")) // where the first non-space byte is
	scan:
		for i := 0; i < len(b); i++ {
			if !first[b[i]] {
				continue
			}
			ls := (i == 0 && p.lineStart) || (i > 0 && b[i-1] == '\n')
			if first['`'] && ls && b[i] == '`' {
				full, partial := prefixOf(b[i:], "```")
				if partial && !final {
					hold = i
					break scan
				}
				if full {
					p.inFence = !p.inFence
					i += 2
					continue
				}
			}
			var best *trigger
			bestN := 0
			for k := range triggers {
				t := &triggers[k]
				switch t.at {
				case lineStart:
					if !ls || p.inFence {
						continue
					}
				case replyStart:
					if p.sawText || i > lead {
						continue
					}
				}
				n, full, partial := t.match(b[i:])
				if partial && !final {
					hold = i
					break scan
				}
				if full && (best == nil || n > bestN) {
					best, bestN = t, n
				}
			}
			if best != nil {
				fire, at, fireN = best, i, bestN
				break
			}
		}
		if fire != nil {
			if t := strings.TrimRight(b[:at], " \t\r\n"); t != "" {
				out(t)
			}
			p.consume(at + fireN)
			p.state = fire.next()
			return true
		}
		if final {
			out(b[:hold])
			if len(ws) > 0 { // whitespace at the very end is the reply's
				p.emit(kind, string(ws))
				ws = ws[:0]
			}
			p.consume(hold)
			return false
		}
		// Hold trailing whitespace too, apart from the buffer so that it is
		// not scanned again: a trigger may follow it. Hold a rune cut short
		// at the end in the buffer (one followed by whitespace is broken
		// for good and goes out as it is).
		w := len(strings.TrimRight(b[:hold], " \t\r\n"))
		if e := runeSafe(b[:w]); e < w && w == hold {
			out(b[:e])
			p.consume(e)
			return false
		}
		out(b[:w])
		ws = append(ws, b[w:hold]...)
		p.consume(hold)
		return false
	}
}

// thinkTriggers returns the trigger that opens a reasoning block (open ...
// close) at the start of the reply, or nothing when reasoning is left raw.
func (p *Parser) thinkTriggers(open, close string, after func() state) []trigger {
	if p.opts.RawReasoning {
		return nil
	}
	return []trigger{{marker: open, at: replyStart, next: func() state { return p.reasoning(close, after) }}}
}

// reasoning reads a reasoning block up to its closing marker, then goes on
// with after.
func (p *Parser) reasoning(close string, after func() state) state {
	return p.text(Reasoning, true, []trigger{{marker: close, at: anywhere, next: after}})
}

// startState is the state a reply begins in: inside reasoning when the
// prompt opened it, else body.
func (p *Parser) startState(close string, body func(trim bool) state) state {
	if p.opts.InReasoning && !p.opts.RawReasoning {
		return p.reasoning(close, func() state { return body(true) })
	}
	return body(false)
}

// tokens consumes a sequence of tokens with optional whitespace before
// each, then goes on with next; what names the sequence in errors.
func (p *Parser) tokens(toks []string, what string, next func() state) state {
	return func(final bool) bool {
		b := p.buf
		i := 0
		for _, tok := range toks {
			for i < len(b) && isSpace(b[i]) {
				i++
			}
			full, partial := prefixOf(b[i:], tok)
			if !full {
				if (partial || i == len(b)) && !final {
					return false
				}
				p.consume(i)
				return p.fail("expected "+what, final && (partial || i == len(b)))
			}
			i += len(tok)
		}
		p.consume(i)
		p.state = next()
		return true
	}
}

// runeSafe returns the length of s without a UTF-8 sequence cut short at
// its end, so that a delta never ends inside a rune whose rest is still to
// come. Invalid bytes are not held.
func runeSafe(s string) int {
	for k := 1; k <= utf8.UTFMax && k <= len(s); k++ {
		c := s[len(s)-k]
		if c < 0x80 {
			return len(s)
		}
		if c >= 0xC0 { // a rune's first byte
			if !utf8.FullRuneInString(s[len(s)-k:]) {
				return len(s) - k
			}
			return len(s)
		}
	}
	return len(s)
}

// until reads text up to marker m, consumes both, and goes on with
// next(text). The text may be at most max bytes long: it is a name or an
// id, not free text. what names it in errors.
func (p *Parser) until(m string, max int, what string, next func(s string) state) state {
	return func(final bool) bool {
		if i := strings.Index(p.buf, m); i >= 0 && i <= max {
			s := p.buf[:i]
			p.consume(i + len(m))
			p.state = next(s)
			return true
		}
		if len(p.buf) > max+len(m) {
			return p.fail(what+" too long or "+m+" missing", false)
		}
		if final {
			return p.fail("output ended inside "+what, true)
		}
		return false
	}
}

// optional consumes token tok after optional whitespace when it is there,
// then goes on with next either way.
func (p *Parser) optional(tok string, next func() state) state {
	return func(final bool) bool {
		ok, wait := p.expect(tok, true, final)
		if wait {
			return false
		}
		_ = ok
		p.state = next()
		return true
	}
}

// validName reports whether s can be a tool's name: letters, digits and
// _ - . : only, as the OpenAI API allows (plus '.' and ':' for namespaces).
func validName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c == '_' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// failed1 returns a state that fails with reason: for constructors of
// states that find the input already wrong.
func (p *Parser) failed1(reason string) state {
	return func(bool) bool { return p.fail(reason, false) }
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}

// valueUntil streams the text before marker m into sink, holding back what
// may be the start of m, then consumes m and goes on with done. With trimNL
// one newline right at the start and one right before m are dropped (the
// templates put the value on lines of its own).
func (p *Parser) valueUntil(m string, trimNL bool, sink func(string), done func() state) state {
	first := trimNL
	return func(final bool) bool {
		if first {
			if p.buf == "" {
				if final {
					return p.fail("output ended inside a parameter", true)
				}
				return false
			}
			if p.buf[0] == '\n' {
				p.consume(1)
			}
			first = false
		}
		b := p.buf
		if i := strings.Index(b, m); i >= 0 {
			s := b[:i]
			if trimNL {
				s = strings.TrimSuffix(s, "\n")
			}
			sink(s)
			p.consume(i + len(m))
			p.state = done()
			return true
		}
		if final {
			return p.fail("output ended inside a parameter", true)
		}
		hold := len(b)
		for k := min(len(m)-1, len(b)); k > 0; k-- {
			if strings.HasSuffix(b, m[:k]) {
				hold = len(b) - k
				break
			}
		}
		if trimNL && hold > 0 && b[hold-1] == '\n' {
			hold--
		}
		hold = runeSafe(b[:hold])
		if hold == 0 {
			return false
		}
		sink(b[:hold])
		p.consume(hold)
		return true
	}
}

// jsonEscape writes s as the inside of a JSON string.
func jsonEscape(s string) string {
	var sb strings.Builder
	for _, r := range s {
		switch {
		case r == '"':
			sb.WriteString(`\"`)
		case r == '\\':
			sb.WriteString(`\\`)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r < 0x20:
			sb.WriteString(`\u00`)
			sb.WriteByte("0123456789abcdef"[r>>4])
			sb.WriteByte("0123456789abcdef"[r&15])
		default:
			sb.WriteRune(r) // an invalid byte becomes U+FFFD
		}
	}
	return sb.String()
}

func isSpaceOnly(s string) bool { return strings.TrimLeft(s, " \t\r\n") == "" }
