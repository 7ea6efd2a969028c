package toolcall

// Hermes (Hermes 2/3, Qwen2.5, Qwen3, QwQ).
//
// The templates render a call as <tool_call>\n{"name": N, "arguments": A}\n
// </tool_call> after the content and a newline, one block per call. So a
// call opens with <tool_call> at the start of a line (the reply's start
// included) outside a ``` code fence; anywhere else <tool_call> is text.
// A <think> block at the reply's start is reasoning.

const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
	thinkOpen   = "<think>"
	thinkClose  = "</think>"
)

func (p *Parser) hermesStart() state {
	return p.startState(thinkClose, p.hermesText)
}

func (p *Parser) hermesText(trim bool) state {
	ts := []trigger{{marker: hermesOpen, at: lineStart, next: p.hermesCall}}
	ts = append(ts, p.thinkTriggers(thinkOpen, thinkClose, func() state { return p.hermesText(true) })...)
	return p.text(Content, trim, ts)
}

func (p *Parser) hermesCall() state {
	return p.objectCall(func() state {
		return p.closing(hermesClose, hermesClose, func() state { return p.hermesText(true) })
	})
}
