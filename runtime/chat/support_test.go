package chat

import (
	"errors"
	"strings"
	"testing"
)

// TestUnsupportedRefusedAtLoad: a construct the engine lacks is refused by
// Compile with ErrInvalidTemplate, naming it and its line, instead of
// failing (or silently rendering nothing) when a render reaches it.
func TestUnsupportedRefusedAtLoad(t *testing.T) {
	for _, tc := range []struct {
		src, want string
	}{
		{"{{ x | wrap }}", `line 1: filter "wrap" is not supported`},
		{"a\n{% filter center %}x{% endfilter %}", `line 2: filter "center" is not supported`},
		{"\n\n{% if x is divisibleby(3) %}{% endif %}", `line 3: test "divisibleby" is not supported`},
		{"{% if x is not divisibleby 3 %}{% endif %}", `line 1: test "divisibleby" is not supported`},
		{"{{ s.rsplit('x', 1) }}", `line 1: method .rsplit() is not supported`},
		{"{{ s.isdigit() }}", `line 1: method .isdigit() is not supported`},
		{"{{ zip(a, b) }}", `line 1: function zip() is not supported`},
		{"{% set ns = namespace(a=[]) %}\n{% set _ = ns.a.append(1) %}", `line 2: method .append() is not supported`},
		{"{% do x %}", `unknown statement "do"`},
		// Inside string literals and comments nothing is checked.
		{"{{ '| wrap .rsplit() zip()' }}{# x | wrap #}", ""},
		// Macros, set variables and loop.cycle may be called.
		{"{% macro m(f) %}{{ f() }}{% endmacro %}{% set j = joiner(',') %}{{ j() }}{% for i in [1] %}{{ loop.cycle('a') }}{% endfor %}", ""},
		{"{{ x is not none and x is string }}{{ y | tojson(indent=2) | trim }}", ""},
	} {
		_, err := New(tc.src, "", "")
		if tc.want == "" {
			if err != nil {
				t.Errorf("New(%q) = %v, want no error", tc.src, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidTemplate) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q) = %v, want ErrInvalidTemplate containing %q", tc.src, err, tc.want)
		}
	}
}
