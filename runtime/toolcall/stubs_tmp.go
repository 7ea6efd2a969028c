package toolcall

func (p *Parser) llamaStart() state   { return p.genericStart() }
func (p *Parser) harmonyStart() state { return p.genericStart() }
