package toolcall

// Qwen3-Coder (and Qwen3.5, which writes calls the same way).
//
//	<tool_call>
//	<function=NAME>
//	<parameter=P>
//	value
//	</parameter>
//	</function>
//	</tool_call>
//
// Values are text: a parameter the tool's schema types as a string becomes
// a JSON string, streamed; any other is held and written as JSON when it is
// JSON, else as a string (a parameter the schema does not know is treated
// like a non-string). The newline after <parameter=P> and the one before
// </parameter> are the template's, not the value's. As with Hermes, a call
// opens with <tool_call> at the start of a line outside a code fence; a
// <think> block at the reply's start is reasoning (Qwen3.5's generation
// prompt opens it).

const (
	coderFunction = "<function="
	coderFuncEnd  = "</function>"
	coderParam    = "<parameter="
	coderParamEnd = "</parameter>"
)

func (p *Parser) coderStart() state {
	return p.startState(thinkClose, p.coderText)
}

func (p *Parser) coderText(trim bool) state {
	ts := []trigger{{marker: hermesOpen, at: lineStart, next: p.coderCall}}
	ts = append(ts, p.thinkTriggers(thinkOpen, thinkClose, func() state { return p.coderText(true) })...)
	return p.text(Content, trim, ts)
}

func (p *Parser) coderCall() state {
	return p.tokens([]string{coderFunction}, coderFunction, func() state {
		return p.until(">", 128, "the tool's name", func(name string) state {
			if !validName(name) {
				return p.failed1("invalid tool name " + quote(name))
			}
			return p.coderParams(name, p.openParams(name))
		})
	})
}

func (p *Parser) coderParams(name string, c *paramCall) state {
	return func(final bool) bool {
		if ok, wait := p.expect(coderParam, true, final); ok || wait {
			if ok {
				p.state = p.until(">", 256, "the parameter's name", func(key string) state {
					c.key(p, key)
					isString, _ := p.stringParam(name, key)
					return p.paramValue(c, isString, true, coderParamEnd, func() state { return p.coderParams(name, c) })
				})
			}
			return ok
		}
		if ok, wait := p.expect(coderFuncEnd, true, final); ok || wait {
			if ok {
				c.close(p)
				p.state = p.closing(hermesClose, hermesClose, func() state { return p.coderText(true) })
			}
			return ok
		}
		if final && isSpaceOnly(p.buf) {
			return p.fail("output ended inside the call", true)
		}
		return p.fail("expected "+coderParam+" or "+coderFuncEnd, false)
	}
}
