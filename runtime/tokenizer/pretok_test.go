package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// splitStrings runs a rule set and returns the pieces as strings.
func splitStrings(rs *ruleSet, text string) []string {
	rt := newRuneText(text)
	var out []string
	for _, sp := range rs.split(rt) {
		out = append(out, text[rt.off[sp.start]:rt.off[sp.end]])
	}
	return out
}

// TestPreTokenizerGolden compares every rule set with splits computed by a
// real regex engine (Python's regex module, see testdata/gen_pretok.py) on
// fixed and random texts. This covers the rule sets that have no llama.cpp
// vocabulary vectors here (bloom, tekken, ...) and what the vectors cannot
// tell apart: Qwen2's vocabulary has no multi-digit tokens, so its vectors
// pass whether digits are split one by one (qwen2) or by three (llama3).
func TestPreTokenizerGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/pretok_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Text   string              `json:"text"`
		Splits map[string][]string `json:"splits"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 100 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		names := make([]string, 0, len(c.Splits))
		for n := range c.Splits {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, name := range names {
			rs, err := lookupRuleSet(name)
			if err != nil {
				t.Fatal(err)
			}
			want := c.Splits[name]
			got := splitStrings(rs, c.Text)
			if len(want) == 0 && len(got) == 0 {
				continue
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: split(%q) mismatch (-want +got):\n%s", name, c.Text, diff)
			}
		}
	}
}

func TestPreTokenizerNames(t *testing.T) {
	for _, tc := range []struct {
		pre, want string
		err       bool
	}{
		{"", "default", false},
		{"default", "default", false},
		{"llama-bpe", "llama3", false},
		{"smollm", "starcoder", false},
		{"qwen2", "qwen2", false},
		{"phi-2", "gpt-2", false},
		{"tekken", "tekken", false},
		{"chameleon", "", true},
		{"no-such-thing", "", true},
	} {
		rs, err := lookupRuleSet(tc.pre)
		if (err != nil) != tc.err {
			t.Errorf("lookupRuleSet(%q) error = %v, want error %v", tc.pre, err, tc.err)
			continue
		}
		if err == nil && rs.name != tc.want {
			t.Errorf("lookupRuleSet(%q) = %s, want %s", tc.pre, rs.name, tc.want)
		}
	}
}

// TestPreTokenizerInvalidUTF8 checks that invalid bytes are kept, each in
// some piece, so byte-level BPE stays lossless.
func TestPreTokenizerInvalidUTF8(t *testing.T) {
	text := "ab\xff\xfe cd\xe2\x82 12\x80"
	for name, rs := range ruleSets {
		var joined string
		for _, p := range splitStrings(rs, text) {
			if p == "" {
				t.Errorf("%s: empty piece", name)
			}
			joined += p
		}
		if joined != text {
			t.Errorf("%s: pieces join to %q, want %q", name, joined, text)
		}
	}
}
