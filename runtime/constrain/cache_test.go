package constrain

import (
	"errors"
	"fmt"
	"testing"
)

func TestCache(t *testing.T) {
	c := NewCache(fuzzVocab.pieces, []int32{int32(len(fuzzVocab.pieces) - 1)}, 3)
	a, err := c.Get(Format{Regex: "a+"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := c.Get(Format{Regex: "a+"}); b != a {
		t.Error("a repeated format was compiled again")
	}
	if b, _ := c.Get(Format{Grammar: `root ::= "a"+`}); b == a {
		t.Error("a grammar with the regex's text shares its entry")
	}
	for i := range 5 {
		if _, err := c.Get(Format{Choice: []string{fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if c.Len() != 3 {
		t.Errorf("%d cached, bound 3", c.Len())
	}
	if b, _ := c.Get(Format{Regex: "a+"}); b == a {
		t.Error("the least recently used entry was not evicted")
	}
	for _, f := range []Format{{}, {Regex: "a", Grammar: "root ::= \"a\""}, {Choice: []string{}}, {JSONSchema: "{"}} {
		if _, err := c.Get(f); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", f, err)
		}
	}
}
