package toolcall

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Llama 3.1-3.3. The templates ask for a call as the whole reply:
//
//	{"name": NAME, "parameters": {...}}
//
// so a reply that starts (whitespace aside) with '{' and the key "name" (or
// "type": "function", which Llama 3.2 writes first) is a call; further
// calls may follow it, after whitespace or ';'. Any other reply is content,
// JSON or not. <|python_tag|> (a special token, so anywhere) starts
// ipython-mode output, the rest of the reply: a JSON call as above, or a
// built-in tool call NAME.call(key="value", ...), or else Python code, which
// becomes a call to "python" with {"code": ...}. The last two are known
// only at the end of the output and are sent then.

const llamaPythonTag = "<|python_tag|>"

func (p *Parser) llamaStart() state { return p.llamaText(false) }

func (p *Parser) llamaText(trim bool) state {
	return p.text(Content, trim, []trigger{
		{marker: "{", seq: []string{"{", `"name"`, ":"}, at: replyStart, next: p.llamaCall},
		{marker: "{", seq: []string{"{", `"type"`, ":", `"function"`}, at: replyStart, next: p.llamaCall},
		{marker: llamaPythonTag, at: anywhere, next: p.llamaPython},
	})
}

func (p *Parser) llamaCall() state { return p.objectCall(p.llamaMore) }

// llamaMore reads what follows a call: another call, or content.
func (p *Parser) llamaMore() state {
	return func(final bool) bool {
		i := 0
		for i < len(p.buf) && (isSpace(p.buf[i]) || p.buf[i] == ';') {
			i++
		}
		if i == len(p.buf) {
			if final {
				p.consume(i)
			}
			return false
		}
		p.consume(i)
		if p.buf[0] == '{' {
			p.state = p.llamaCall()
		} else {
			p.state = p.llamaText(true)
		}
		return true
	}
}

func (p *Parser) llamaPython() state {
	var rest strings.Builder // the rest of the reply, when it is not JSON
	return func(final bool) bool {
		if rest.Len() == 0 {
			if !p.skipSpace() {
				if final {
					return p.fail("output ended after "+llamaPythonTag, true)
				}
				return false
			}
			if p.buf[0] == '{' {
				p.state = p.llamaCall()
				return true
			}
		}
		// The whole rest is one call, read at the end.
		rest.WriteString(p.buf)
		p.consume(len(p.buf))
		if !final {
			return false
		}
		code := strings.TrimSpace(rest.String())
		if m := builtinCall.FindStringSubmatch(code); m != nil {
			args, ok := pythonKwargs(m[2])
			if !ok {
				return p.fail("unreadable arguments of "+m[1], false)
			}
			i := p.startCall(m[1])
			p.callArgs(i, args)
			p.endCall(i)
			return false
		}
		i := p.startCall("python")
		p.callArgs(i, `{"code": "`+jsonEscape(code)+`"}`)
		p.endCall(i)
		return false
	}
}

var builtinCall = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\.call\(([\s\S]*)\)$`)

// pythonKwargs turns key="value", key=123, key=True ... into a JSON object.
func pythonKwargs(s string) (string, bool) {
	var sb strings.Builder
	sb.WriteByte('{')
	s = strings.TrimSpace(s)
	for n := 0; s != ""; n++ {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return "", false
		}
		key := strings.TrimSpace(s[:eq])
		if !validName(key) {
			return "", false
		}
		s = strings.TrimSpace(s[eq+1:])
		var val string
		if s != "" && (s[0] == '"' || s[0] == '\'') {
			q := s[0]
			j := 1
			var v strings.Builder
			for ; j < len(s) && s[j] != q; j++ {
				c := s[j]
				if c == '\\' && j+1 < len(s) {
					j++
					c = s[j]
					switch c {
					case 'n':
						c = '\n'
					case 't':
						c = '\t'
					}
				}
				v.WriteByte(c)
			}
			if j == len(s) {
				return "", false
			}
			val = `"` + jsonEscape(v.String()) + `"`
			s = s[j+1:]
		} else {
			end := strings.IndexByte(s, ',')
			if end < 0 {
				end = len(s)
			}
			word := strings.TrimSpace(s[:end])
			switch word {
			case "True":
				val = "true"
			case "False":
				val = "false"
			case "None":
				val = "null"
			default:
				if !json.Valid([]byte(word)) || word == "" || !(word[0] == '-' || isDigit(word[0])) {
					return "", false
				}
				val = word
			}
			s = s[end:]
		}
		if n > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(`"` + key + `": ` + val)
		s = strings.TrimSpace(s)
		if s != "" {
			if s[0] != ',' {
				return "", false
			}
			s = strings.TrimSpace(s[1:])
		}
	}
	sb.WriteByte('}')
	return sb.String(), true
}
