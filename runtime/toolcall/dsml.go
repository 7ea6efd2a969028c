package toolcall

import "strings"

// DeepSeek V3.2 and V4 (DSML). Calls are a block of special-token tags,
// counted wherever they appear:
//
//	<｜DSML｜function_calls>
//	<｜DSML｜invoke name="NAME">
//	<｜DSML｜parameter name="P" string="true">text</｜DSML｜parameter>
//	<｜DSML｜parameter name="Q" string="false">JSON</｜DSML｜parameter>
//	</｜DSML｜invoke>
//	</｜DSML｜function_calls>
//
// (V4 names the block tool_calls). string="true" values are strings,
// streamed; others are JSON (see params.go for what is done when they are
// not). A <think> block at the reply's start is reasoning; the prompt opens
// it when thinking is on.

const (
	dsml            = "<｜DSML｜"
	dsmlInvoke      = "<｜DSML｜invoke name=\""
	dsmlInvokeEnd   = "</｜DSML｜invoke>"
	dsmlParam       = "<｜DSML｜parameter name=\""
	dsmlParamEnd    = "</｜DSML｜parameter>"
	dsmlFunctionsV3 = "function_calls>"
	dsmlToolsV4     = "tool_calls>"
)

func (p *Parser) dsmlStart() state {
	return p.startState(thinkClose, p.dsmlText)
}

func (p *Parser) dsmlText(trim bool) state {
	ts := []trigger{
		{marker: dsml + dsmlFunctionsV3, at: anywhere, next: func() state { return p.dsmlBlock("</｜DSML｜" + dsmlFunctionsV3) }},
		{marker: dsml + dsmlToolsV4, at: anywhere, next: func() state { return p.dsmlBlock("</｜DSML｜" + dsmlToolsV4) }},
	}
	ts = append(ts, p.thinkTriggers(thinkOpen, thinkClose, func() state { return p.dsmlText(true) })...)
	return p.text(Content, trim, ts)
}

// dsmlBlock reads the next invoke of a block, or the block's end tag.
func (p *Parser) dsmlBlock(end string) state {
	return func(final bool) bool {
		if ok, wait := p.expect(dsmlInvoke, true, final); ok || wait {
			if ok {
				p.state = p.until(`">`, 128, "the tool's name", func(name string) state {
					if !validName(name) {
						return p.failed1("invalid tool name " + quote(name))
					}
					return p.dsmlParams(end, p.openParams(name))
				})
			}
			return ok
		}
		if ok, wait := p.expect(end, true, final); ok || wait {
			if ok {
				p.state = p.dsmlText(true)
			}
			return ok
		}
		if final && isSpaceOnly(p.buf) {
			p.consume(len(p.buf))
			p.state = p.dsmlText(true)
			return true
		}
		return p.fail("expected "+dsmlInvoke+" or "+end, false)
	}
}

func (p *Parser) dsmlParams(end string, c *paramCall) state {
	return func(final bool) bool {
		if ok, wait := p.expect(dsmlParam, true, final); ok || wait {
			if ok {
				p.state = p.until(`"`, 256, "the parameter's name", func(key string) state {
					return p.until(">", 64, "the parameter's attributes", func(attrs string) state {
						c.key(p, key)
						isString := strings.Contains(attrs, `string="true"`)
						return p.paramValue(c, isString, false, dsmlParamEnd, func() state { return p.dsmlParams(end, c) })
					})
				})
			}
			return ok
		}
		if ok, wait := p.expect(dsmlInvokeEnd, true, final); ok || wait {
			if ok {
				c.close(p)
				p.state = p.dsmlBlock(end)
			}
			return ok
		}
		if final && isSpaceOnly(p.buf) {
			return p.fail("output ended inside the call", true)
		}
		return p.fail("expected "+dsmlParam+" or "+dsmlInvokeEnd, false)
	}
}
