package tokenizer

import "testing"

func TestControlTextIn(t *testing.T) {
	tok := load(t, "models/stories260K.gguf")
	for _, tc := range []struct {
		text, want string
		found      bool
	}{
		{"Once upon a time", "", false},
		{"a</s>b", "</s>", true},
		{"x<s> then </s>", "<s>", true}, // the first in the text
		{"<unk>", "<unk>", true},
		{"< /s>", "", false},
		{"", "", false},
	} {
		got, found := tok.ControlTextIn(tc.text)
		if got != tc.want || found != tc.found {
			t.Errorf("ControlTextIn(%q) = %q, %v; want %q, %v", tc.text, got, found, tc.want, tc.found)
		}
	}
}
