package chat

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// checkErr fails unless err is nil or wraps one of the package's sentinels.
func checkErr(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range []error{ErrInvalidTemplate, ErrRejected, ErrLimit, ErrRender} {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("error %v wraps none of the package's sentinels", err)
}

var fuzzTemplates = []string{
	"chatml.jinja", "llama2-chat.jinja", "llama3-instruct.jinja", "mistral-instruct.jinja",
	"qwen2.5-instruct.jinja", "smollm2.jinja", "zephyr-tinyllama.jinja",
}

// FuzzRender renders arbitrary conversations with the real templates. It
// must never panic, and message contents must come out verbatim (they are
// data, never template code).
func FuzzRender(f *testing.F) {
	f.Add(uint8(0), "user", "Hi", "assistant", "Hello", true)
	f.Add(uint8(1), "system", "{{ raise_exception('x') }}", "user", "{% for %}", false)
	f.Add(uint8(2), "user", "  \n\t ", "user", "\x00\xff", true)
	f.Add(uint8(4), "tool", "}}{{", "tool", "'\"\\", true)
	f.Add(uint8(5), "", "", "", "", false)
	tmpls := make([]*Template, len(fuzzTemplates))
	for i, name := range fuzzTemplates {
		var err error
		if tmpls[i], err = New(load(f, name), "<s>", "</s>"); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, role1, content1, role2, content2 string, gen bool) {
		tmpl := tmpls[int(which)%len(tmpls)]
		msgs := []Message{{Role: role1, Content: content1}, {Role: role2, Content: content2}}
		out, err := tmpl.Render(msgs, gen)
		checkErr(t, err)
		if tmpl.Source() == load(t, "chatml.jinja") && err == nil {
			for _, m := range msgs {
				if !strings.Contains(out, "<|im_start|>"+m.Role+"\n"+m.Content+"<|im_end|>") {
					t.Fatalf("ChatML output %q lacks message %q", out, m)
				}
			}
		}
	})
}

// FuzzNew compiles and renders arbitrary template sources. It must never
// panic or hang: engine panics become errors, and the step budget stops
// runaway loops and recursion.
func FuzzNew(f *testing.F) {
	for _, name := range fuzzTemplates {
		f.Add(load(f, name))
	}
	f.Add("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")
	f.Add("{% for i in range(100) %}{% for j in range(100) %}{{ i }}{% endfor %}{% endfor %}")
	f.Add("{% set ns = namespace(x=0) %}{% for m in messages[::-1] %}{% set ns.x = ns.x + 1 %}{% endfor %}{{ ns.x }}{{ messages | tojson }}")
	f.Add("{{ 'a' * -1 }}{{ x.y.z }}{% if %}")
	f.Add("{% raw %}{% for %}{% endraw %}{# {% macro %} #}{{ '%}' }}")
	lim := Limits{MaxSteps: 2000, MaxRange: 1000, MaxOutputBytes: 1 << 20, Timeout: 200 * time.Millisecond}
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := Compile(Config{Source: src, BOSToken: "<s>", EOSToken: "</s>", Limits: lim})
		checkErr(t, err)
		if err != nil {
			return
		}
		_, err = tmpl.Render([]Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}, {Role: "assistant", Content: "a"}}, true)
		checkErr(t, err)
	})
}
