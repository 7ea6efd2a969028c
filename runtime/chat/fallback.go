package chat

import "fmt"

// Built-in templates for models without tokenizer.chat_template.
const (
	// chatMLSource is ChatML, the format of OpenAI's ChatML, Qwen, SmolLM2,
	// OpenHermes and many fine-tunes, and llama.cpp's fallback. The
	// <|im_start|>/<|im_end|> markers are plain text to a model that lacks
	// them as special tokens, which still reads as a clear transcript.
	chatMLSource = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

	// plainSource is "role: content" lines, for base models (such as the
	// TinyStories models) that know no chat markup at all.
	plainSource = "{% for message in messages %}{{ message['role'] + ': ' + message['content'] + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}"
)

var fallbacks = map[string]string{
	"chatml": chatMLSource,
	"plain":  plainSource,
}

// Fallback returns the built-in template called name: "chatml" or "plain".
func Fallback(name string) (*Template, error) {
	src, ok := fallbacks[name]
	if !ok {
		return nil, fmt.Errorf("%w: no built-in template %q (have chatml, plain)", ErrInvalidTemplate, name)
	}
	return Compile(Config{Source: src, Name: name})
}

// Default returns the ChatML template, used for models whose GGUF has no
// tokenizer.chat_template. ChatML is what llama.cpp falls back to, it is the
// format most chat fine-tunes were trained on, and its explicit turn markers
// keep roles apart even for a model that has never seen them.
func Default() *Template {
	t, err := Fallback("chatml")
	if err != nil {
		panic("chat: built-in ChatML template does not compile: " + err.Error()) // invariant
	}
	return t
}
