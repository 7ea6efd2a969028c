package toolcall

import (
	"encoding/json"
	"strings"
)

// Readers of a call's parts written in JSON, shared by the formats.

// objectCall reads one call written as a JSON object whose "name" key holds
// the tool's name and whose "arguments" (or "parameters") key holds the
// arguments: an object, or a string holding one. Other keys are checked and
// ignored. The call opens as soon as its name is read; arguments read before
// the name are held until then. after is the state once the object closed.
func (p *Parser) objectCall(after func() state) state {
	c := &objCall{index: -1}
	return func(final bool) bool { return c.step(p, final, after) }
}

const (
	ocOpen     = iota // before '{'
	ocFirstKey        // after '{': a key or '}'
	ocKey             // after ',': a key
	ocKeyStr          // inside a key
	ocColon           // after a key
	ocValue0          // before a value
	ocValue           // inside a value
	ocAfter           // after a value: ',' or '}'
)

// Roles of a value in a call object.
const (
	roleSkip = iota
	roleName
	roleArgs       // an object, streamed once the call has opened
	roleArgsString // a string holding the arguments' JSON
	roleArgsNull   // null: no arguments
)

type objCall struct {
	st      int
	sc      jscan
	role    int
	raw     []byte // the key or held value being read
	index   int    // the call's index once it opened, else -1
	name    string
	args    []byte // arguments read before the name, or decoded from a string
	gotArgs bool
}

func (c *objCall) step(p *Parser, final bool, after func() state) bool {
	b := p.buf
	i := 0
	run := -1 // start in b of arguments bytes to stream
	flush := func(end int) {
		if run >= 0 {
			p.callArgs(c.index, b[run:end])
			run = -1
		}
	}
	for ; i < len(b); i++ {
		ch := b[i]
		switch c.st {
		case ocOpen, ocFirstKey, ocKey, ocColon, ocValue0, ocAfter:
			if isSpace(ch) {
				continue
			}
		}
		switch c.st {
		case ocOpen:
			if ch != '{' {
				p.consume(i)
				return p.fail("a call must be a JSON object", false)
			}
			c.st = ocFirstKey
		case ocFirstKey, ocKey:
			if ch == '}' && c.st == ocFirstKey {
				p.consume(i + 1)
				return c.close(p, after)
			}
			if ch != '"' {
				p.consume(i)
				return p.fail("expected a key", false)
			}
			c.sc = jscan{}
			c.sc.step(ch)
			c.raw = append(c.raw[:0], ch)
			c.st = ocKeyStr
		case ocKeyStr:
			r := c.sc.step(ch)
			if r == jErr {
				p.consume(i)
				return p.fail("malformed key", false)
			}
			c.raw = append(c.raw, ch)
			if r == jEnd {
				var k string
				if json.Unmarshal(c.raw, &k) != nil {
					p.consume(i)
					return p.fail("malformed key", false)
				}
				c.role = roleSkip
				switch k {
				case "name":
					c.role = roleName
				case "arguments", "parameters":
					if c.gotArgs {
						p.consume(i)
						return p.fail("arguments given twice", false)
					}
					c.role = roleArgs
				}
				c.st = ocColon
			}
		case ocColon:
			if ch != ':' {
				p.consume(i)
				return p.fail("expected ':'", false)
			}
			c.st = ocValue0
		case ocValue0:
			if c.role == roleArgs {
				switch ch {
				case '{':
				case '"':
					c.role = roleArgsString
				case 'n':
					c.role = roleArgsNull
				default:
					p.consume(i)
					return p.fail("arguments must be a JSON object", false)
				}
			}
			c.sc = jscan{}
			c.raw = c.raw[:0]
			c.st = ocValue
			fallthrough
		case ocValue:
			r := c.sc.step(ch)
			if r == jErr {
				flush(i)
				p.consume(i)
				return p.fail("malformed JSON", false)
			}
			if r != jEndBefore {
				switch {
				case c.role == roleArgs && c.index >= 0:
					if run < 0 {
						run = i
					}
				case c.role != roleSkip:
					c.raw = append(c.raw, ch)
				}
			}
			if r == jEnd || r == jEndBefore {
				end := i + 1
				if r == jEndBefore {
					end = i
				}
				flush(end)
				if !c.endValue(p) {
					p.consume(end)
					return false
				}
				c.st = ocAfter
				if r == jEndBefore {
					i-- // read ch again after the value
				}
			}
		case ocAfter:
			switch ch {
			case ',':
				c.st = ocKey
			case '}':
				p.consume(i + 1)
				return c.close(p, after)
			default:
				p.consume(i)
				return p.fail("expected ',' or '}'", false)
			}
		}
	}
	flush(i)
	p.consume(i)
	if final {
		return p.fail("output ended inside the call", true)
	}
	return false
}

// endValue handles a value just read; false when it failed the parser.
func (c *objCall) endValue(p *Parser) bool {
	switch c.role {
	case roleName:
		if json.Unmarshal(c.raw, &c.name) != nil || !validName(c.name) {
			return p.fail("the name is not a tool's name", false)
		}
		if c.index >= 0 {
			return p.fail("name given twice", false)
		}
		c.index = p.startCall(c.name)
		if c.gotArgs {
			p.callArgs(c.index, string(c.args))
		}
	case roleArgs:
		c.gotArgs = true
		if c.index < 0 {
			c.args = append([]byte(nil), c.raw...)
		}
	case roleArgsString:
		var s string
		if json.Unmarshal(c.raw, &s) != nil || !isObject(s) {
			return p.fail("the arguments string does not hold a JSON object", false)
		}
		c.gotArgs = true
		c.args = []byte(s)
		if c.index >= 0 {
			p.callArgs(c.index, s)
		}
	case roleArgsNull:
		c.gotArgs = true
		c.args = []byte("{}")
		if c.index >= 0 {
			p.callArgs(c.index, "{}")
		}
	}
	return true
}

// close ends the call when its object closed.
func (c *objCall) close(p *Parser, after func() state) bool {
	if c.index < 0 {
		return p.fail("the call has no name", false)
	}
	if !c.gotArgs {
		p.callArgs(c.index, "{}")
	}
	p.endCall(c.index)
	p.state = after()
	return true
}

// isObject reports whether s is one JSON object.
func isObject(s string) bool {
	t := strings.TrimSpace(s)
	return strings.HasPrefix(t, "{") && json.Valid([]byte(t))
}

// argsValue reads a call's arguments written as a bare JSON object (after
// the name, which the format wrote elsewhere), streaming them into call
// index. Whitespace before the object is skipped. after is the state once
// the object closed.
func (p *Parser) argsValue(index int, after func() state) state {
	var sc jscan
	started := false
	return func(final bool) bool {
		b := p.buf
		i := 0
		if !started {
			for i < len(b) && isSpace(b[i]) {
				i++
			}
			if i == len(b) {
				p.consume(i)
				if final {
					return p.fail("output ended before the arguments", true)
				}
				return false
			}
			if b[i] != '{' {
				p.consume(i)
				return p.fail("arguments must be a JSON object", false)
			}
			started = true
		}
		from := i
		for ; i < len(b); i++ {
			switch sc.step(b[i]) {
			case jErr:
				p.callArgs(index, b[from:i])
				p.consume(i)
				return p.fail("malformed JSON in the arguments", false)
			case jEnd:
				p.callArgs(index, b[from:i+1])
				p.consume(i + 1)
				p.endCall(index)
				p.state = after()
				return true
			}
		}
		p.callArgs(index, b[from:])
		p.consume(len(b))
		if final {
			return p.fail("output ended inside the arguments", true)
		}
		return false
	}
}

// closing expects marker m after optional whitespace, then goes on with
// next. At the end of the output a missing closing marker is forgiven: what
// it closes was complete.
func (p *Parser) closing(m, what string, next func() state) state {
	return func(final bool) bool {
		ok, wait := p.expect(m, true, final)
		switch {
		case ok:
			p.state = next()
			return true
		case wait:
			return false
		case final && strings.TrimSpace(p.buf) == "":
			p.consume(len(p.buf))
			p.state = next()
			return true
		}
		return p.fail("expected "+what, false)
	}
}
