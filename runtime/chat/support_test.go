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
		{"{% set ns = namespace(a=[]) %}\n{% set _ = ns.a.append(ns.a) %}", `line 2: method .append() is not supported`},
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

// TestEngineConstructs pins what 2026 templates rely on, with the output
// Hugging Face's Jinja gives.
func TestEngineConstructs(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", "2"},
		{"{% for i in [1, 2, 3, 4] %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}", "13"},
		{"{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}", "u"},
		{"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;"},
		{"{% for k, v in {'b': 1, 'a': 2} | dictsort %}{{ k }}{% endfor %}", "ab"},
		{"{{ ' <think>x</think>y '.strip().startswith('<think>') }} {{ 'a</think>b'.split('</think>')[-1] }} {{ 'aXbX'.replace('X', '-') }}", "True b a-b-"},
		{"{{ 'abc' is iterable }} {{ 'abc' is string }} {{ {} is mapping }} {{ none is none }} {{ x is defined }}", "True True True True False"},
		{"{{ messages[0].content | tojson }}{{ messages[-1]['role'] }}{{ messages | length }}", `"s"user2`},
		{"{{ strftime_now('%d %B %Y') }}", "05 March 2026"},
		{"{{ raise_exception('no') }}", "rejected: no"},
	} {
		tmpl, err := New(tc.src, "", "")
		if err != nil {
			t.Errorf("New(%q): %v", tc.src, err)
			continue
		}
		got, err := tmpl.RenderVars([]Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}, false, Vars{Now: fixedNow})
		if err != nil {
			var rej *RejectedError
			if errors.As(err, &rej) {
				got = "rejected: " + rej.Message
			} else {
				t.Errorf("Render(%q): %v", tc.src, err)
				continue
			}
		}
		if got != tc.want {
			t.Errorf("Render(%q) = %q, want %q", tc.src, got, tc.want)
		}
	}
}
