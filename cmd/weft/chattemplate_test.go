package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/chat"
)

// stories260K has no tokenizer.chat_template: without --chat-template it
// serves no Chat; with one it gets the named fallback. The built-in model
// has its own template, which --chat-template overrides.
func TestChooseChatTemplate(t *testing.T) {
	stories, err := runtime.Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer stories.Close()
	builtin, err := runtime.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer builtin.Close()
	file := filepath.Join(t.TempDir(), "t.jinja")
	if err := os.WriteFile(file, []byte("{% for m in messages %}[{{ m['content'] }}]{% endfor %}"), 0o600); err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{{Role: "user", Content: "hi"}}
	for _, tc := range []struct {
		name         string
		m            *runtime.Model
		flag         string
		wantFallback string
		wantRender   string // "" with no template
	}{
		{"no template, no flag", stories, "", "", ""},
		{"no template, chatml", stories, "chatml", "chatml", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"},
		{"no template, plain", stories, "plain", "plain", "user: hi\nassistant:"},
		{"no template, a file", stories, file, file, "[hi]"},
		{"own template", builtin, "", "", "<|user|>\nhi</s>\n<|assistant|>\n"},
		{"own template overridden", builtin, "plain", "plain", "user: hi\nassistant:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc, err := chooseChatTemplate(tc.flag, tc.m)
			if err != nil {
				t.Fatal(err)
			}
			if cc.Fallback != tc.wantFallback {
				t.Errorf("fallback %q, want %q", cc.Fallback, tc.wantFallback)
			}
			if tc.wantRender == "" {
				if cc.Template != nil || cc.Why == "" {
					t.Errorf("template %v (why %q), want none and a reason", cc.Template, cc.Why)
				}
				return
			}
			segs, err := cc.Template.RenderSegments(msgs, true)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			for _, s := range segs {
				out.WriteString(s.Text)
			}
			if out.String() != tc.wantRender {
				t.Errorf("renders %q, want %q", out.String(), tc.wantRender)
			}
		})
	}
	if _, err := chooseChatTemplate("no-such-template", stories); err == nil {
		t.Error("an unknown name that is no file was accepted")
	}
}
