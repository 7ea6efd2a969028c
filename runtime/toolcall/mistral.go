package toolcall

import "strings"

// Mistral (Nemo, Small 3.x, Devstral, Ministral).
//
// [TOOL_CALLS] is a control token, so wherever it appears it opens calls.
// What follows is either a JSON array of call objects (Nemo:
// [TOOL_CALLS][{"name": ..., "arguments": {...}, "id": ...}]) or one call
// as NAME[ARGS]{...} (Devstral, Ministral), with [CALL_ID]ID before [ARGS]
// in Small 3.2; parallel calls repeat [TOOL_CALLS]. Ids the model writes
// are ignored: the parser's own go to the client, which sends them back.
// [THINK]...[/THINK] (Ministral reasoning, a control-token pair) is
// reasoning wherever it appears.

const (
	mistralCalls   = "[TOOL_CALLS]"
	mistralArgs    = "[ARGS]"
	mistralCallID  = "[CALL_ID]"
	mistralThink   = "[THINK]"
	mistralUnthink = "[/THINK]"
)

func (p *Parser) mistralStart() state {
	return p.startState(mistralUnthink, p.mistralText)
}

func (p *Parser) mistralText(trim bool) state {
	ts := []trigger{{marker: mistralCalls, at: anywhere, next: p.mistralCall}}
	if !p.opts.RawReasoning {
		ts = append(ts, trigger{marker: mistralThink, at: anywhere, next: func() state {
			return p.reasoning(mistralUnthink, func() state { return p.mistralText(true) })
		}})
	}
	return p.text(Content, trim, ts)
}

func (p *Parser) mistralCall() state {
	after := func() state { return p.mistralText(true) }
	return func(final bool) bool {
		if !p.skipSpace() {
			if final {
				return p.fail("output ended after "+mistralCalls, true)
			}
			return false
		}
		if p.buf[0] == '[' {
			p.state = p.callArray(after)
			return true
		}
		p.state = p.until("[", 128, "the tool's name", func(name string) state {
			if !validName(name) {
				return p.failed1("invalid tool name " + quote(name))
			}
			p.buf = "[" + p.buf // give back the '[' of [ARGS] or [CALL_ID]
			return func(final bool) bool {
				if ok, wait := p.expect(mistralArgs, false, final); ok || wait {
					if ok {
						p.state = p.argsValue(p.startCall(name), after)
					}
					return ok
				}
				if ok, wait := p.expect(mistralCallID, false, final); ok || wait {
					if ok {
						p.state = p.until(mistralArgs, 64, "the call id", func(string) state {
							return p.argsValue(p.startCall(name), after)
						})
					}
					return ok
				}
				if final && strings.TrimSpace(p.buf) == "[" {
					return p.fail("output ended after the tool's name", true)
				}
				return p.fail("expected "+mistralArgs+" after the tool's name", false)
			}
		})
		return true
	}
}
