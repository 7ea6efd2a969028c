package chat

import (
	"errors"
	"testing"
)

func TestCyclesRejected(t *testing.T) {
	for name, src := range map[string]string{
		"namespace holds itself":   "{% set ns = namespace(n=0) %}{% set ns.n = ns %}{{ ns.n }}",
		"in a list":                "{% set ns = namespace(n=0) %}{% set ns.n = [ns] %}{{ ns }}",
		"through a variable":       "{% set ns = namespace(n=0) %}{% set l = [1, ns] %}{% set ns.n = l %}{{ ns }}",
		"through a loop variable":  "{% set ns = namespace(n=0) %}{% for x in [ns] %}{% set ns.n = x %}{% endfor %}{{ ns }}",
		"through a macro argument": "{% macro f(a, b) %}{% set a.n = b %}{% endmacro %}{% set ns = namespace(n=0) %}{{ f(ns, ns) }}{{ ns }}",
		"keyword argument":         "{% macro f(a, b=1) %}{% set a.n = b %}{% endmacro %}{% set ns = namespace(n=0) %}{{ f(ns, b=ns) }}",
		"two namespaces":           "{% set a = namespace(x=0) %}{% set b = namespace(y=a) %}{% set a.x = b %}{{ a }}",
		"fresh namespace argument": "{% macro f(p) %}{% set p.x = p %}{{ p }}{% endmacro %}{{ f(namespace(x=1)) }}",
		"list append":              "{% set l = [] %}{% set _ = l.append(l) %}{{ l }}",
		"dict update":              "{% set d = {} %}{% set _ = d.update({'a': d}) %}{{ d }}",
		"insert":                   "{% set l = [] %}{{ l.insert(0, l) }}",
	} {
		_, err := New(src, "", "")
		if !errors.Is(err, ErrInvalidTemplate) {
			t.Errorf("%s: New = %v, want ErrInvalidTemplate", name, err)
		}
	}
}

func TestCycleCheckAcceptsCommonPatterns(t *testing.T) {
	for name, src := range map[string]string{
		"flags":         "{% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% set ns.found = true %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}",
		"accumulate":    "{% set ns = namespace(parts=[]) %}{% for m in messages %}{% set ns.parts = ns.parts + [m.content] %}{% endfor %}{{ ns.parts | join(',') }}",
		"out parameter": "{% macro parse(s, st, out) %}{% set out.node = ['n', s[st.pos:]] %}{% endmacro %}{% set st = namespace(pos=0) %}{% set child = namespace(node=none) %}{{ parse('abc', st, child) }}{{ child.node | tojson }}",
		"shadowed name": "{% macro f(s) %}{% set start = 1 %}{{ s[start:] }}{% endmacro %}{% set start = namespace(x=1) %}{{ f('abc') }}",
		"string method": "{{ messages[0].content.strip() }}{% set x = 'a,b'.split(',') %}{{ x | length }}",
	} {
		tmpl, err := New(src, "", "")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if _, err := tmpl.Render(multiTurn, true); err != nil {
			t.Errorf("%s: Render: %v", name, err)
		}
	}
}
