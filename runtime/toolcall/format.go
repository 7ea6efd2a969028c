package toolcall

import (
	"fmt"
	"strings"
)

// Format is the way one family of models writes tool calls and reasoning.
type Format uint8

const (
	// FormatGeneric is the fallback for templates without tool support: the
	// system prompt asks for {"tool_calls":[{"name":...,"arguments":{...}}]}
	// as the whole reply. A leading <think> block is reasoning.
	FormatGeneric Format = iota
	// FormatHermes: Hermes 2/3, Qwen2.5, Qwen3, QwQ. Calls are
	// <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, one block
	// per call; a leading <think> block is reasoning.
	FormatHermes
	// FormatQwen3Coder: <tool_call>\n<function=NAME>\n<parameter=P>\nvalue\n
	// </parameter>\n</function>\n</tool_call>, values typed by the tool's
	// schema.
	FormatQwen3Coder
	// FormatLlama3: Llama 3.1-3.3. A call is the whole reply,
	// {"name": ..., "parameters": {...}}, or follows <|python_tag|>.
	FormatLlama3
	// FormatMistral: Mistral Nemo, Small 3.x, Devstral, Ministral.
	// [TOOL_CALLS] then a JSON array of calls, or name[ARGS]{...} (with
	// [CALL_ID]id before [ARGS] in Small 3.2); [THINK]...[/THINK] is
	// reasoning.
	FormatMistral
	// FormatHarmony: gpt-oss. Messages on channels: analysis is reasoning,
	// final is content, commentary to=functions.NAME is a call.
	FormatHarmony
	// FormatDeepSeek: DeepSeek R1 (and its distills) and V3/V3.1.
	// <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>...<｜tool▁sep｜>... blocks;
	// <think> reasoning.
	FormatDeepSeek
	// FormatDeepSeekDSML: DeepSeek V3.2 and V4. <｜DSML｜function_calls>
	// blocks of <｜DSML｜invoke name="..."> with typed parameters; <think>
	// reasoning.
	FormatDeepSeekDSML
)

var formatNames = [...]string{
	FormatGeneric:      "generic",
	FormatHermes:       "hermes",
	FormatQwen3Coder:   "qwen3-coder",
	FormatLlama3:       "llama3",
	FormatMistral:      "mistral",
	FormatHarmony:      "harmony",
	FormatDeepSeek:     "deepseek",
	FormatDeepSeekDSML: "deepseek-dsml",
}

// Formats lists every format, in the order of their constants.
func Formats() []Format {
	fs := make([]Format, len(formatNames))
	for i := range fs {
		fs[i] = Format(i)
	}
	return fs
}

func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("format(%d)", uint8(f))
}

// ParseFormat returns the format of the given name (as String writes it),
// for an operator's override of Detect.
func ParseFormat(name string) (Format, error) {
	for i, n := range formatNames {
		if strings.EqualFold(name, n) {
			return Format(i), nil
		}
	}
	return 0, fmt.Errorf("toolcall: unknown format %q (want one of %s)", name, strings.Join(formatNames[:], ", "))
}

// Detect picks the format a chat template teaches its model, from the
// template's source: the first rule that matches wins.
//
//	<|channel|> and <|message|>            harmony
//	｜DSML｜                                deepseek-dsml
//	<｜tool▁call▁begin｜>                    deepseek
//	<function= and <tool_call>             qwen3-coder
//	<tool_call> and "name": (JSON inside)  hermes
//	[TOOL_CALLS]                           mistral
//	<|python_tag|> or "parameters": dict…  llama3
//	anything else                          generic
func Detect(template string) Format {
	has := func(s string) bool { return strings.Contains(template, s) }
	switch {
	case has("<|channel|>") && has("<|message|>"):
		return FormatHarmony
	case has("｜DSML｜"):
		return FormatDeepSeekDSML
	case has("<｜tool▁call▁begin｜>"):
		return FormatDeepSeek
	case has("<function=") && has("<tool_call>"):
		return FormatQwen3Coder
	case has("<tool_call>") && (has(`"name": `) || has(`\"name\": `)):
		return FormatHermes
	case has("[TOOL_CALLS]"):
		return FormatMistral
	case has("<|python_tag|>") || has(`"parameters": dictionary of argument name`):
		return FormatLlama3
	}
	return FormatGeneric
}

// OpensReasoning reports whether a rendered prompt leaves the reply inside
// a reasoning block (it ends with the block's opening marker and maybe
// whitespace), for Options.InReasoning.
func OpensReasoning(f Format, prompt string) bool {
	open := "<think>"
	switch f {
	case FormatHarmony, FormatLlama3:
		return false
	case FormatMistral:
		open = "[THINK]"
	}
	return strings.HasSuffix(strings.TrimRight(prompt, " \t\r\n"), open)
}

// initial is the state a reply starts in.
func (p *Parser) initial() state {
	switch p.format {
	case FormatHermes:
		return p.hermesStart()
	case FormatQwen3Coder:
		return p.coderStart()
	case FormatLlama3:
		return p.llamaStart()
	case FormatMistral:
		return p.mistralStart()
	case FormatHarmony:
		return p.harmonyStart()
	case FormatDeepSeek:
		return p.deepseekStart()
	case FormatDeepSeekDSML:
		return p.dsmlStart()
	}
	return p.genericStart()
}
