package toolcall

func (p *Parser) coderStart() state   { return p.genericStart() }
func (p *Parser) llamaStart() state   { return p.genericStart() }
func (p *Parser) harmonyStart() state { return p.genericStart() }
func (p *Parser) dsmlStart() state    { return p.genericStart() }
