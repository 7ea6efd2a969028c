package toolcall

import (
	"encoding/json"
	"strings"
)

// Formats that write arguments as named parameters with text values
// (Qwen3-Coder, DeepSeek DSML) build the JSON object as they go: "{" when
// the call opens, `"key": value` per parameter, "}" when it ends. A string
// value streams as it comes, escaped; any other value is held until its end
// marker and written as JSON when it is JSON (True, False and None, as
// Qwen3-Coder's template writes them, taken for true, false and null), else
// as a JSON string (the arguments then still parse; whether they fit the schema is the
// validator's business, or the grammar's, which forbids this).

// paramCall is the object being written for one call.
type paramCall struct {
	index int
	n     int // parameters written
}

func (p *Parser) openParams(name string) *paramCall {
	c := &paramCall{index: p.startCall(name)}
	p.callArgs(c.index, "{")
	return c
}

func (c *paramCall) key(p *Parser, k string) {
	sep := ""
	if c.n > 0 {
		sep = ", "
	}
	c.n++
	p.callArgs(c.index, sep+`"`+jsonEscape(k)+`": `)
}

// paramValue reads one parameter's value up to its end marker m, then goes on
// with next.
func (p *Parser) paramValue(c *paramCall, isString, trimNL bool, m string, next func() state) state {
	if isString {
		p.callArgs(c.index, `"`)
		return p.valueUntil(m, trimNL, func(s string) { p.callArgs(c.index, jsonEscape(s)) }, func() state {
			p.callArgs(c.index, `"`)
			return next()
		})
	}
	var sb strings.Builder
	return p.valueUntil(m, trimNL, func(s string) { sb.WriteString(s) }, func() state {
		v := strings.TrimSpace(sb.String())
		switch v { // Python's spellings: Qwen3-Coder's template writes values with Jinja's string filter
		case "True":
			v = "true"
		case "False":
			v = "false"
		case "None":
			v = "null"
		}
		if v == "" || !json.Valid([]byte(v)) {
			v = `"` + jsonEscape(sb.String()) + `"`
		}
		p.callArgs(c.index, v)
		return next()
	})
}

func (c *paramCall) close(p *Parser) {
	p.callArgs(c.index, "}")
	p.endCall(c.index)
}

// stringParam reports whether the schema of the named tool types parameter
// key as a string (a "type" of "string", or a list holding "string").
func (p *Parser) stringParam(tool, key string) (isString, known bool) {
	props, ok := p.props[tool]
	if !ok {
		t, known := p.tools[tool]
		var schema struct {
			Properties map[string]propSchema `json:"properties"`
		}
		if known && len(t.Parameters) > 0 {
			json.Unmarshal(t.Parameters, &schema) // a schema that does not decode types nothing
		}
		props = schema.Properties
		if p.props == nil {
			p.props = map[string]map[string]propSchema{}
		}
		p.props[tool] = props
	}
	prop, ok := props[key]
	if !ok || len(prop.Type) == 0 {
		return false, false
	}
	var one string
	if json.Unmarshal(prop.Type, &one) == nil {
		return one == "string", true
	}
	var many []string
	if json.Unmarshal(prop.Type, &many) == nil {
		for _, s := range many {
			if s == "string" {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}

// propSchema is what the parser reads of a property's schema.
type propSchema struct {
	Type json.RawMessage `json:"type"`
}
