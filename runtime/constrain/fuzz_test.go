package constrain

import (
	"testing"
)

// fuzzVocab is a small vocabulary with every single byte and a few
// multi-byte pieces, so masks are computed without shared files.
var fuzzVocab = func() *testVocab {
	tv := &testVocab{}
	for c := range 256 {
		tv.pieces = append(tv.pieces, []byte{byte(c)})
	}
	for _, p := range []string{`{"`, `":`, `","`, `"}`, "true", "null", "日本", "\xe6\x97", "abc", "12", "-1", "],[", "::=", " ", ""} {
		tv.pieces = append(tv.pieces, []byte(p))
	}
	tv.v = NewVocab(tv.pieces, []int32{int32(len(tv.pieces) - 1)})
	return tv
}()

// FuzzCompile compiles fuzzed schemas, grammars and regexes: no panic,
// every error wraps ErrInvalid, and a compiled one runs over input bytes
// and yields masks.
func FuzzCompile(f *testing.F) {
	f.Add(uint8(0), `{"type":"object","properties":{"a":{"type":"integer","minimum":-3,"maximum":70}},"required":["a"]}`, []byte(`{"a":-2}`))
	f.Add(uint8(0), `{"$defs":{"n":{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":3}},"$ref":"#/$defs/n"}`, []byte(`[[],[[]]]`))
	f.Add(uint8(0), `{"anyOf":[{"type":"string","format":"date-time"},{"enum":[1,"x",null]}]}`, []byte(`"2020-01-01T00:00:00Z"`))
	f.Add(uint8(0), `{"type":"string","pattern":"^[a-z]{2,}\\d?$"}`, []byte(`"ab1"`))
	f.Add(uint8(1), "root ::= item+\nitem ::= \"- \" [^\\n]+ \"\\n\"", []byte("- a\n"))
	f.Add(uint8(1), `root ::= ("a" | [b-d]{2,3})* "."`, []byte("abb."))
	f.Add(uint8(2), `(foo|ba[rz])+\d{0,3}`, []byte("foobar12"))
	f.Fuzz(func(t *testing.T, kind uint8, src string, input []byte) {
		var g *Grammar
		var err error
		switch kind % 3 {
		case 0:
			g, err = CompileJSONSchema(src)
		case 1:
			g, err = CompileGBNF(src)
		case 2:
			g, err = CompileRegex(src)
		}
		if err != nil {
			if !isInvalid(err) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		c := NewConstraint(g, fuzzVocab.v, fuzzVocab.pieces)
		seq := c.Start()
		if len(input) > 64 {
			input = input[:64]
		}
		for _, b := range input {
			_ = seq.Allowed()
			if seq.Accept(int32(b)) != nil {
				break
			}
		}
		_ = seq.Allowed()
	})
}

func isInvalid(err error) bool {
	for e := err; e != nil; {
		if e == ErrInvalid {
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}
