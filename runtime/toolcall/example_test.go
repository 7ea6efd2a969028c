package toolcall_test

import (
	"fmt"

	"github.com/weft-inference/weft/runtime/toolcall"
)

func Example() {
	// Qwen3 with thinking on: the generation prompt ends in "<think>\n".
	template := `... <tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call> ...`
	f := toolcall.Detect(template)
	p := toolcall.NewParser(f, toolcall.Options{
		InReasoning: toolcall.OpensReasoning(f, "<|im_start|>assistant\n<think>\n"),
		NewID:       func() string { return "call_1" },
	})
	pieces := []string{"The user wants", " weather.\n</th", "ink>\n\nChecking.\n<tool", "_call>\n{\"name\": \"get_weather\", ",
		"\"arguments\": {\"city\": ", "\"Paris\"}}\n</tool_call>"}
	for _, s := range pieces {
		for _, e := range p.Push(s) {
			fmt.Printf("%v %d %q %q %q\n", e.Kind, e.Index, e.ID, e.Name, e.Text)
		}
	}
	evs, err := p.Finish()
	fmt.Println(f, len(evs), err)
	// Output:
	// reasoning 0 "" "" "The user wants"
	// reasoning 0 "" "" " weather."
	// content 0 "" "" "Checking."
	// call-start 0 "call_1" "get_weather" ""
	// call-args 0 "" "" "{\"city\": "
	// call-args 0 "" "" "\"Paris\"}"
	// call-end 0 "" "" ""
	// hermes 0 <nil>
}
