package chat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func load(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	userOnly  = []Message{{Role: "user", Content: "Hi"}}
	withSys   = []Message{{Role: "system", Content: "You are a friendly chatbot."}, {Role: "user", Content: "Hi"}}
	multiTurn = []Message{{Role: "system", Content: "Sys"}, {Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello!"}, {Role: "user", Content: "How are you?"}}
	padded    = []Message{{Role: "user", Content: "  Hi there \n"}}
)

func TestRealTemplates(t *testing.T) {
	for _, tc := range []struct {
		file     string
		bos, eos string
		msgs     []Message
		gen      bool
		want     string
	}{
		// Llama 3 instruct: the format in Meta's model card.
		{"llama3-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", userOnly, true,
			"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"llama3-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", multiTurn, true,
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nSys<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n"},
		// | trim applies to the content only (filters bind tighter than +).
		{"llama3-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", padded, false,
			"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"},
		// Llama 2 chat: system prompt folded into the first [INST].
		{"llama2-chat.jinja", "<s>", "</s>", multiTurn, true,
			"<s>[INST] <<SYS>>\nSys\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] How are you? [/INST]"},
		{"llama2-chat.jinja", "<s>", "</s>", padded, true, "<s>[INST] Hi there [/INST]"},
		// TinyLlama chat v1.0 (Zephyr): needs trim_blocks (Hugging Face's
		// default) to drop the newlines after block tags.
		{"zephyr-tinyllama.jinja", "<s>", "</s>", withSys, true,
			"<|system|>\nYou are a friendly chatbot.</s>\n<|user|>\nHi</s>\n<|assistant|>\n"},
		{"zephyr-tinyllama.jinja", "<s>", "</s>", userOnly, false, "<|user|>\nHi</s>\n"},
		// Mistral instruct: no generation prompt, no system role.
		{"mistral-instruct.jinja", "<s>", "</s>", []Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello!"}, {Role: "user", Content: "Again"}}, true,
			"<s>[INST] Hi [/INST]Hello!</s>[INST] Again [/INST]"},
		// Qwen2.5: default system prompt when none is given.
		{"qwen2.5-instruct.jinja", "", "<|im_end|>", userOnly, true,
			"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" +
				"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"qwen2.5-instruct.jinja", "", "<|im_end|>", multiTurn, false,
			"<|im_start|>system\nSys<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n" +
				"<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n"},
		{"qwen2.5-instruct.jinja", "", "<|im_end|>", []Message{{Role: "user", Content: "Weather?"}, {Role: "tool", Content: "22C"}, {Role: "tool", Content: "sunny"}}, true,
			"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" +
				"<|im_start|>user\nWeather?<|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\n22C\n</tool_response>\n<tool_response>\nsunny\n</tool_response><|im_end|>\n" +
				"<|im_start|>assistant\n"},
		// SmolLM2: injects its own system prompt when none is given.
		{"smollm2.jinja", "<|im_start|>", "<|im_end|>", userOnly, true,
			"<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n" +
				"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"smollm2.jinja", "<|im_start|>", "<|im_end|>", withSys, false,
			"<|im_start|>system\nYou are a friendly chatbot.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"},
		{"chatml.jinja", "", "", withSys, true,
			"<|im_start|>system\nYou are a friendly chatbot.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
	} {
		tmpl, err := New(load(t, tc.file), tc.bos, tc.eos)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		got, err := tmpl.Render(tc.msgs, tc.gen)
		if err != nil {
			t.Errorf("%s %v: %v", tc.file, tc.msgs, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s %v gen=%v (-want +got):\n%s", tc.file, tc.msgs, tc.gen, diff)
		}
	}
}

func TestRaiseExceptionIsRejected(t *testing.T) {
	for _, tc := range []struct {
		file string
		msgs []Message
		want string
	}{
		{"llama2-chat.jinja", []Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}, "Conversation roles must alternate user/assistant/user/assistant/..."},
		{"mistral-instruct.jinja", []Message{{Role: "assistant", Content: "a"}}, "Conversation roles must alternate user/assistant/user/assistant/..."},
		{"mistral-instruct.jinja", []Message{{Role: "system", Content: "s"}}, "Conversation roles must alternate user/assistant/user/assistant/..."},
	} {
		tmpl, err := New(load(t, tc.file), "<s>", "</s>")
		if err != nil {
			t.Fatal(err)
		}
		_, err = tmpl.Render(tc.msgs, true)
		if !errors.Is(err, ErrRejected) {
			t.Fatalf("%s %v: error %v, want ErrRejected", tc.file, tc.msgs, err)
		}
		var rej *RejectedError
		if !errors.As(err, &rej) {
			t.Fatalf("%s: error %T is not a *RejectedError", tc.file, err)
		}
		if rej.Message != tc.want {
			t.Errorf("%s: message %q, want %q", tc.file, rej.Message, tc.want)
		}
	}
}

// The step checks that Compile inserts must not change any output: render
// every fixture with and without them.
func TestInstrumentKeepsOutput(t *testing.T) {
	files, err := filepath.Glob("testdata/*.jinja")
	if err != nil || len(files) < 7 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	extra := map[string]string{
		"trim-right":    "{% for m in messages -%}\n   [{{ m.role }}]\n{%- endfor %}\n  end",
		"lstrip":        "{% for m in messages %}\n    {% if m.role == 'user' %}\n  U:{{ m.content }}\n    {% endif %}\n{% endfor %}",
		"macro":         "{% macro show(m) -%}\n  <{{ m.role }}>{{ m.content }}\n{%- endmacro %}\n{% for m in messages %}{{ show(m) }}\n{% endfor %}",
		"raw":           "{% raw %}{% for x in y %}{% endraw %}{% for m in messages %}{{ m.role }}{% endfor %}",
		"quoted closer": "{% for m in messages if m.role != '%}' %}{{ m.content }}{% endfor %}",
		"recursive":     "{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(5) }}",
		"comment":       "{# {% for x in y %} #}{% for m in messages %}{{ loop.index }}{% endfor %}",
	}
	for _, f := range files {
		extra[f] = load(t, filepath.Base(f))
	}
	for name, src := range extra {
		inst := instrument(src)
		if inst == src && strings.Contains(src, "for ") {
			t.Errorf("%s: instrument inserted nothing", name)
		}
		for _, msgs := range [][]Message{userOnly, multiTurn, withSys} {
			want, errWant := renderPlain(src, msgs)
			tmpl, err := New(src, "<s>", "</s>")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got, errGot := tmpl.Render(msgs, true)
			if (errWant == nil) != (errGot == nil) {
				t.Errorf("%s: plain error %v, instrumented error %v", name, errWant, errGot)
				continue
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s %v: instrumented output differs (-plain +instrumented):\n%s", name, msgs, diff)
			}
		}
	}
}

func TestHostileTemplatesAreBounded(t *testing.T) {
	lim := Limits{MaxSteps: 1000, Timeout: 5 * time.Second, MaxOutputBytes: 1 << 16, MaxRange: 100}
	for _, tc := range []struct {
		name, src string
		want      error
	}{
		{"infinite recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", ErrLimit},
		{"recursion through loop", "{% macro f() %}{% for i in [1] %}{{ f() }}{% endfor %}{% endmacro %}{{ f() }}", ErrLimit},
		{"mutual recursion", "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}", ErrLimit},
		{"nested loops", "{% for i in range(100) %}{% for j in range(100) %}x{% endfor %}{% endfor %}", ErrLimit},
		{"huge range", "{% for i in range(1000000000000) %}{% endfor %}", ErrLimit},
		{"negative huge range", "{{ range(9223372036854775807, -9223372036854775807, -1) | length }}", ErrLimit},
		{"big output", "{% for i in range(90) %}{{ 'x' * 1000 }}{% endfor %}", ErrLimit},
		{"engine panic", "{{ 'a' * -1 }}", ErrRender},
		// Calling a name the template never defines is refused by Compile
		// (TestUnsupportedRefusedAtLoad); a bound non-function fails here.
		{"call of a non-function", "{% set nothing = 1 %}{{ nothing() }}", ErrRender},
	} {
		tmpl, err := Compile(Config{Source: tc.src, Limits: lim, Name: tc.name})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		out, err := tmpl.Render(userOnly, true)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Render = %.40q, %v; want error %v", tc.name, out, err, tc.want)
		}
	}

	// A source over the size limit is refused by Compile.
	_, err := Compile(Config{Source: strings.Repeat("x", 100), Limits: Limits{MaxSourceBytes: 99}})
	if !errors.Is(err, ErrInvalidTemplate) {
		t.Errorf("oversized source: %v, want ErrInvalidTemplate", err)
	}
}

func TestTimeout(t *testing.T) {
	// A nanosecond deadline has passed by the 64th step.
	tmpl, err := Compile(Config{Source: "{% for i in range(1000) %}{% endfor %}", Limits: Limits{Timeout: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmpl.Render(nil, false); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("Render = %v, want a timeout ErrLimit", err)
	}
}

func TestInvalidTemplates(t *testing.T) {
	for _, src := range []string{"{% for %}", "{{ unclosed", "{% if x %}no end", "{% endfor %}"} {
		if _, err := New(src, "", ""); !errors.Is(err, ErrInvalidTemplate) {
			t.Errorf("New(%q) = %v, want ErrInvalidTemplate", src, err)
		}
	}
	if _, err := Compile(Config{Source: "x", Limits: Limits{MaxSteps: -1}}); err == nil {
		t.Errorf("negative limit accepted")
	}
}

func TestContentIsData(t *testing.T) {
	tmpl := Default()
	msgs := []Message{{Role: "user", Content: "{{ raise_exception('x') }}{% for %}"}}
	got, err := tmpl.Render(msgs, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\n{{ raise_exception('x') }}{% for %}<|im_end|>\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFallbacks(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string
	}{
		{"chatml", "<|im_start|>system\nYou are a friendly chatbot.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"plain", "system: You are a friendly chatbot.\nuser: Hi\nassistant:"},
	} {
		tmpl, err := Fallback(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tmpl.Render(withSys, true)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	if _, err := Fallback("nope"); err == nil {
		t.Errorf("Fallback(nope) succeeded")
	}
	if tmpl := Default(); tmpl.Name() != "chatml" {
		t.Errorf("Default() is %q, want chatml", tmpl.Name())
	}
}

func TestConcurrentRender(t *testing.T) {
	tmpl, err := New(load(t, "qwen2.5-instruct.jinja"), "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	want, err := tmpl.Render(multiTurn, true)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 20 {
				got, err := tmpl.Render(multiTurn, true)
				if err == nil && got != want {
					err = errors.New("different output: " + got)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func BenchmarkRenderQwen(b *testing.B) {
	tmpl, err := New(load(b, "qwen2.5-instruct.jinja"), "", "<|im_end|>")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tmpl.Render(multiTurn, true); err != nil {
			b.Fatal(err)
		}
	}
}
