package chat

import "github.com/ardanlabs/jinja"

// renderPlain renders src with the engine directly, without the step
// checks, as the reference for TestInstrumentKeepsOutput.
func renderPlain(src string, msgs []Message) (string, error) {
	tmpl, err := jinja.Compile(src)
	if err != nil {
		return "", err
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		list[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	return tmpl.Render(map[string]any{
		"messages": list, "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
	})
}
