package toolcall

import "strings"

// DeepSeek R1 (and the R1 distills) and V3/V3.1.
//
// Calls are special tokens, so they count wherever they appear:
//
//	<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//	```json
//	{...}
//	```<｜tool▁call▁end｜>
//	<｜tool▁call▁begin｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//
// (R1: the type, then the name on its line and the arguments in a json
// fence), or <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
// (V3.1). Both are read: when the text before <｜tool▁sep｜> is "function",
// the name follows it. A <think> block at the reply's start is reasoning;
// R1's generation prompt opens it (Options.InReasoning).
const (
	dsCallsBegin = "<｜tool▁calls▁begin｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsSep        = "<｜tool▁sep｜>"
)

func (p *Parser) deepseekStart() state {
	return p.startState(thinkClose, p.deepseekText)
}

func (p *Parser) deepseekText(trim bool) state {
	ts := []trigger{
		{marker: dsCallsBegin, at: anywhere, next: p.deepseekCalls},
		{marker: dsCallBegin, at: anywhere, next: p.deepseekCall},
	}
	ts = append(ts, p.thinkTriggers(thinkOpen, thinkClose, func() state { return p.deepseekText(true) })...)
	return p.text(Content, trim, ts)
}

// deepseekCalls reads the next call of a block, or the block's end.
func (p *Parser) deepseekCalls() state {
	return func(final bool) bool {
		if ok, wait := p.expect(dsCallBegin, true, final); ok || wait {
			if ok {
				p.state = p.deepseekCall()
			}
			return ok
		}
		if ok, wait := p.expect(dsCallsEnd, true, final); ok || wait {
			if ok {
				p.state = p.deepseekText(true)
			}
			return ok
		}
		if final && strings.TrimSpace(p.buf) == "" {
			// The output stopped at the block's end token's place.
			p.consume(len(p.buf))
			p.state = p.deepseekText(true)
			return true
		}
		return p.fail("expected "+dsCallBegin+" or "+dsCallsEnd, false)
	}
}

func (p *Parser) deepseekCall() state {
	return p.until(dsSep, 128, "the call's head", func(head string) state {
		head = strings.TrimSpace(head)
		if head == "function" {
			return p.until("\n", 128, "the tool's name", func(name string) state {
				return p.deepseekArgs(strings.TrimSpace(name))
			})
		}
		return p.deepseekArgs(head)
	})
}

func (p *Parser) deepseekArgs(name string) state {
	if !validName(name) {
		return p.failed1("invalid tool name " + quote(name))
	}
	return p.optional("```json", func() state {
		return p.argsValue(p.startCall(name), func() state {
			return p.optional("```", func() state {
				return p.closing(dsCallEnd, dsCallEnd, p.deepseekCalls)
			})
		})
	})
}
