package toolcall

// Generic fallback, for templates that know no tools: the system prompt the
// door adds asks for the reply
//
//	{"tool_calls": [{"name": "NAME", "arguments": {...}}, ...]}
//
// and nothing else when the model calls tools. So calls are recognised
// only when the reply starts (whitespace and a <think> block aside) with
// '{' and the key "tool_calls"; any other reply is content.

func (p *Parser) genericStart() state {
	return p.startState(thinkClose, p.genericText)
}

func (p *Parser) genericText(trim bool) state {
	ts := []trigger{{marker: "{", seq: []string{"{", `"tool_calls"`, ":"}, at: replyStart, next: p.genericCalls}}
	ts = append(ts, p.thinkTriggers(thinkOpen, thinkClose, func() state { return p.genericText(true) })...)
	return p.text(Content, trim, ts)
}

func (p *Parser) genericCalls() state {
	return p.tokens([]string{"{", `"tool_calls"`, ":"}, `{"tool_calls":`, func() state {
		return p.callArray(func() state {
			return p.tokens([]string{"}"}, "'}' closing the reply", func() state { return p.genericText(true) })
		})
	})
}

// callArray reads a JSON array of call objects (see objectCall), then goes
// on with next.
func (p *Parser) callArray(next func() state) state {
	return p.tokens([]string{"["}, "'['", func() state {
		return func(final bool) bool {
			// An empty array, or the first call.
			ok, wait := p.expect("]", true, final)
			switch {
			case ok:
				p.state = next()
			case wait:
				return false
			default:
				p.state = p.objectCall(func() state { return p.callArrayRest(next) })
			}
			return true
		}
	})
}

// callArrayRest reads what follows a call in an array: ',' and the next
// call, or ']'.
func (p *Parser) callArrayRest(next func() state) state {
	return func(final bool) bool {
		if !p.skipSpace() {
			if final {
				return p.fail("output ended inside the list of calls", true)
			}
			return false
		}
		switch p.buf[0] {
		case ',':
			p.consume(1)
			p.state = p.objectCall(func() state { return p.callArrayRest(next) })
		case ']':
			p.consume(1)
			p.state = next()
		default:
			return p.fail("expected ',' or ']' in the list of calls", false)
		}
		return true
	}
}
