package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/chat"
)

// chatChoice is what Chat renders with.
type chatChoice struct {
	Template frontdoor.ChatRenderer // nil: Chat is refused with NO_CHAT_TEMPLATE
	// Fallback names the operator's template ("chatml", "plain", a file)
	// when Template is not the model's own; GetModelInfo's
	// has_chat_template is false then.
	Fallback string
	// Why says, for the log, why Chat has no template or a fallback.
	Why string
}

// chooseChatTemplate picks Chat's template. The rule: the model's own
// template (its GGUF's tokenizer.chat_template), unless the operator names
// another with --chat-template (a built-in, chatml or plain, or a file of
// Jinja source), which then wins. A model without a template of its own
// (or whose template does not compile) gets no Chat at all unless the
// operator names one: a silent ChatML would make a base model answer in a
// format it never saw, and a client could not tell.
func chooseChatTemplate(flag string, m *runtime.Model) (chatChoice, error) {
	own := strings.TrimSpace(m.ChatTemplate) != "" && m.TemplateErr == nil
	switch {
	case flag == "" && own:
		return chatChoice{Template: m.Template}, nil
	case flag == "" && m.TemplateErr != nil:
		return chatChoice{Why: "the model's chat template does not compile (" + m.TemplateErr.Error() + "); Chat is off, --chat-template names a fallback"}, nil
	case flag == "":
		return chatChoice{Why: "the model has no chat template; Chat is off, --chat-template names a fallback"}, nil
	}
	if t, err := chat.Fallback(flag); err == nil {
		return chatChoice{Template: t, Fallback: flag, Why: "--chat-template " + flag}, nil
	}
	src, err := os.ReadFile(flag)
	if err != nil {
		return chatChoice{}, fmt.Errorf("--chat-template %q: not chatml or plain, and not a readable file: %w", flag, err)
	}
	t, err := m.CompileTemplate(string(src))
	if err != nil {
		return chatChoice{}, fmt.Errorf("--chat-template %q: %w", flag, err)
	}
	return chatChoice{Template: t, Fallback: flag, Why: "--chat-template " + flag}, nil
}
