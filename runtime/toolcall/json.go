package toolcall

import "errors"

// jscan is an incremental JSON syntax checker: it is fed one byte at a
// time and says whether the byte continues a valid JSON value, ends it, or
// breaks it. It checks syntax only (RFC 8259), not UTF-8 validity; strings
// may not hold raw control characters, as the RFC says.
type jscan struct {
	stack []byte // open containers, '{' or '['
	st    jstate
	key   bool   // the string being read is an object key
	lit   string // bytes still expected of true, false or null
	hex   int    // hex digits still expected of a \u escape
}

type jstate uint8

const (
	jValue    jstate = iota // a value is expected
	jArrFirst               // after '[': a value or ']'
	jObjFirst               // after '{': a key or '}'
	jObjKey                 // after ',' in an object: a key
	jColon                  // after a key
	jAfter                  // after a value inside a container: ',' or the close
	jString                 // inside a string
	jEscape                 // after a backslash
	jHex                    // inside \uXXXX
	jLit                    // inside true, false or null
	jMinus                  // after a leading '-'
	jZero                   // after a leading 0
	jInt                    // in the integer digits
	jDot                    // after the decimal point
	jFrac                   // in the fraction digits
	jExpMark                // after e or E
	jExpSign                // after the exponent's sign
	jExp                    // in the exponent digits
)

// Results of jscan.step.
const (
	jCont      = iota // the byte continues the value
	jEnd              // the byte ends the value
	jEndBefore        // the value ended just before this byte, which is not part of it
	jErr              // the byte cannot continue a valid value
)

// maxDepth bounds nesting so hostile input cannot grow the stack without end.
const maxDepth = 1000

var errJSON = errors.New("invalid JSON")

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// endValue closes a value just read.
func (s *jscan) endValue() int {
	if len(s.stack) == 0 {
		return jEnd
	}
	s.st = jAfter
	return jCont
}

// complete reports whether the bytes fed so far form a whole value (a
// top-level number is complete at the end of the input).
func (s *jscan) complete() bool {
	if len(s.stack) != 0 {
		return false
	}
	switch s.st {
	case jZero, jInt, jFrac, jExp:
		return true
	}
	return false
}

func (s *jscan) step(c byte) int {
	switch s.st {
	case jValue, jArrFirst:
		if isSpace(c) {
			return jCont
		}
		if c == ']' && s.st == jArrFirst {
			s.stack = s.stack[:len(s.stack)-1]
			return s.endValue()
		}
		switch {
		case c == '{' || c == '[':
			if len(s.stack) >= maxDepth {
				return jErr
			}
			s.stack = append(s.stack, c)
			if c == '{' {
				s.st = jObjFirst
			} else {
				s.st = jArrFirst
			}
		case c == '"':
			s.st, s.key = jString, false
		case c == 't':
			s.st, s.lit = jLit, "rue"
		case c == 'f':
			s.st, s.lit = jLit, "alse"
		case c == 'n':
			s.st, s.lit = jLit, "ull"
		case c == '-':
			s.st = jMinus
		case c == '0':
			s.st = jZero
		case c >= '1' && c <= '9':
			s.st = jInt
		default:
			return jErr
		}
		return jCont
	case jObjFirst, jObjKey:
		if isSpace(c) {
			return jCont
		}
		if c == '}' && s.st == jObjFirst {
			s.stack = s.stack[:len(s.stack)-1]
			return s.endValue()
		}
		if c != '"' {
			return jErr
		}
		s.st, s.key = jString, true
		return jCont
	case jColon:
		if isSpace(c) {
			return jCont
		}
		if c != ':' {
			return jErr
		}
		s.st = jValue
		return jCont
	case jAfter:
		if isSpace(c) {
			return jCont
		}
		top := s.stack[len(s.stack)-1]
		switch {
		case c == ',' && top == '{':
			s.st = jObjKey
		case c == ',':
			s.st = jValue
		case c == '}' && top == '{', c == ']' && top == '[':
			s.stack = s.stack[:len(s.stack)-1]
			return s.endValue()
		default:
			return jErr
		}
		return jCont
	case jString:
		switch {
		case c == '"':
			if s.key {
				s.st = jColon
				return jCont
			}
			return s.endValue()
		case c == '\\':
			s.st = jEscape
		case c < 0x20:
			return jErr
		}
		return jCont
	case jEscape:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			s.st = jString
		case 'u':
			s.st, s.hex = jHex, 4
		default:
			return jErr
		}
		return jCont
	case jHex:
		if !(isDigit(c) || (c|0x20) >= 'a' && (c|0x20) <= 'f') {
			return jErr
		}
		if s.hex--; s.hex == 0 {
			s.st = jString
		}
		return jCont
	case jLit:
		if c != s.lit[0] {
			return jErr
		}
		if s.lit = s.lit[1:]; s.lit == "" {
			return s.endValue()
		}
		return jCont
	case jMinus:
		switch {
		case c == '0':
			s.st = jZero
		case isDigit(c):
			s.st = jInt
		default:
			return jErr
		}
		return jCont
	case jZero, jInt:
		switch {
		case isDigit(c) && s.st == jInt:
			return jCont
		case c == '.':
			s.st = jDot
			return jCont
		case c == 'e' || c == 'E':
			s.st = jExpMark
			return jCont
		}
		return s.endNumber(c)
	case jDot:
		if !isDigit(c) {
			return jErr
		}
		s.st = jFrac
		return jCont
	case jFrac:
		switch {
		case isDigit(c):
			return jCont
		case c == 'e' || c == 'E':
			s.st = jExpMark
			return jCont
		}
		return s.endNumber(c)
	case jExpMark:
		switch {
		case c == '+' || c == '-':
			s.st = jExpSign
		case isDigit(c):
			s.st = jExp
		default:
			return jErr
		}
		return jCont
	case jExpSign:
		if !isDigit(c) {
			return jErr
		}
		s.st = jExp
		return jCont
	case jExp:
		if isDigit(c) {
			return jCont
		}
		return s.endNumber(c)
	}
	return jErr
}

// endNumber ends a number at byte c, which is not part of it.
func (s *jscan) endNumber(c byte) int {
	if len(s.stack) == 0 {
		return jEndBefore
	}
	s.st = jAfter
	return s.step(c)
}
