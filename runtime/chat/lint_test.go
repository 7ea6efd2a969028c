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
		"append of a list name":    "{% set x = [] %}{% set l = [] %}{% set _ = l.append(x) %}",
		"name rebound to a list":   "{% set x = 'a' %}{% set x = [] %}{% set l = [] %}{% set _ = l.append(x) %}",
		"append of a loop item":    "{% set l = [] %}{% for x in [l] %}{% set _ = l.append(x) %}{% endfor %}",
		"conditional value":        "{% set l = [] %}{% set _ = l.append('a' if l else l) %}",
		"sum without a literal":    "{% set l = [] %}{% set _ = l.append(l + l) %}",
		"extend":                   "{% set l = [] %}{% set _ = l.extend(['a']) %}",
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
		// Kimi K2: a queue of tool call ids (strings) filled with append
		// and drained with pop.
		"queue of ids": "{% set q = namespace(ids=[], n=0) %}{% for m in messages %}{% set id = 'f.' + m.role + ':' + (q.n | string) %}{% set q.n = q.n + 1 %}{% set _ = q.ids.append(id) %}{% endfor %}" +
			"{% set _ = q.ids.insert(0, 'x' ~ 1) %}{% set _ = q.ids.append(7) %}{% set first = q.ids.pop(0) %}{{ first }}{{ q.ids | join(',') }}",
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
