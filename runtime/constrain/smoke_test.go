package constrain

import "testing"

func TestSmoke(t *testing.T) {
	g, err := CompileJSONSchema(`{"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":123},"b":{"type":"string","maxLength":3},"c":{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2}},"required":["a"]}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`{"a":5}`, `{"a":-5,"b":"xy"}`, `{"a":123,"c":[true,false]}`, `{"a":0,"b":"","c":[true]}`} {
		if !g.Match([]byte(s)) {
			t.Errorf("no match %s", s)
		}
	}
	for _, s := range []string{`{"a":124}`, `{"a":-6}`, `{"a":05}`, `{"b":"x"}`, `{"a":1,"b":"abcd"}`, `{"a":1,"c":[]}`, `{"a":-0}`} {
		if g.Match([]byte(s)) {
			t.Errorf("match %s", s)
		}
	}
	r, err := CompileRegex(`^(ab|c)*[x-z]{2,3}$`)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Match([]byte("abcabxy")) || r.Match([]byte("abx")) {
		t.Error("regex")
	}
	o := JSONObject()
	if !o.Match([]byte(`{"x":[1,2.5e3,{"y":null}],"z":"\u00e9é"}`)) {
		t.Error("obj")
	}
}
