// Package chat turns a conversation into the prompt text a model expects,
// by rendering the model's chat template (the Jinja source in the GGUF key
// tokenizer.chat_template, as in Hugging Face's apply_chat_template).
//
// Templates are compiled once per model with New (or Compile, with limits)
// and rendered per request with Render; a Template is immutable and safe
// for concurrent use. A model without a template gets no chat unless the
// operator names a fallback (weft serve --chat-template): Fallback
// ("chatml") is Default(), ChatML, llama.cpp's fallback and the format
// most chat fine-tunes were trained on, whose explicit turn markers keep
// roles apart even in a model that never saw them; Fallback("plain") is a
// "role: content" alternative for base models.
//
// # Engine
//
// The Jinja engine is github.com/ardanlabs/jinja, a pure-Go engine made for
// LLM chat templates. It applies Hugging Face's trim_blocks/lstrip_blocks
// defaults and has what real templates use: loops with loop.first/last/
// index0 and break/continue, slicing (messages[1:]), namespace(), macros,
// selectattr, dict .items(), string methods (.strip(), .startswith(),
// .split(), .replace(), ...). The package exposes to the template messages
// (dicts with role, content and, when set, reasoning_content, tool_calls,
// tool_call_id, name), add_generation_prompt, bos_token, eos_token,
// raise_exception, and through RenderVars the variables of Vars: tools,
// enable_thinking, reasoning_effort, builtin_tools, date_string and
// further JSON values; documents are undefined.
//
// The engine has no registry of filters, so the package extends it the way
// it adds globals (raise_exception, a bounded range, strftime_now on a
// clock the caller may fix): by variables given to every render, and by
// rewriting the source at Compile (as the step checks below are inserted).
// The engine looks a filter it does not have up among the variables, so
// Compile renames "| tojson" to a variable holding Hugging Face's tojson
// (Python's json.dumps: keys in their order with indent too, ensure_ascii,
// sort_keys, separators, Python's float format); the engine's own sorts
// keys under indent, which changes Llama 3.x's tool prompts.
//
// Compile refuses, with ErrInvalidTemplate naming the construct and its
// line, a template that uses a filter, test, method or function the engine
// lacks (it would otherwise fail only when a render reaches it, or render a
// missing method's result as nothing), a statement it does not parse, or a
// list mutation that could build a cycle (see below). All 70 templates in
// shared/templates compile and render (TestSharedTemplates keeps the table
// of outcomes).
//
// # Errors
//
// Errors wrap ErrInvalidTemplate (Compile: the model's template is broken,
// too large, or uses what the engine lacks), ErrBadInput (RenderVars: a
// tool definition or extra variable that is not valid JSON of the right
// shape), ErrRejected (the template called raise_exception: it
// refuses the conversation, e.g. roles that do not alternate; a client
// error), ErrLimit (a render ran past Limits) or ErrRender (any other
// render failure).
//
// # What is guaranteed against a hostile template
//
// Message contents are data: template syntax in them is never evaluated.
// For the template itself (it comes from the model file):
//
//   - Compile and Render never panic: engine panics are recovered and
//     returned as errors.
//   - Sources over Limits.MaxSourceBytes (512 KiB) are refused.
//   - Compile inserts a step check, rendering nothing, after every
//     {% for %} and {% macro %} tag. A render that makes more than
//     Limits.MaxSteps loop iterations plus macro calls (50000), or that
//     is still running at a step after Limits.Timeout (1s), stops with
//     ErrLimit. This bounds loops and recursion, including the unbounded
//     macro recursion that would otherwise overflow the Go stack and kill
//     the process. The check keeps the output byte for byte (tested on
//     every fixture; also checked once, by hand, on the 17 current model
//     templates in the engine's own test data).
//   - range() builds at most Limits.MaxRange (10000) items.
//   - Output over Limits.MaxOutputBytes (8 MiB) is an error.
//   - Compile rejects templates that could build a cyclic value, which
//     the engine would print or compare by recursing until the Go stack
//     overflows (fatal, not a panic): list/dict mutation methods
//     (.append, .update, ...; Hugging Face's sandbox forbids them too)
//     except .pop and the .append/.insert of a value that can only be a
//     scalar (Kimi K2's queue of tool call ids), and
//     namespace attribute assignments whose value may hold a namespace
//     (see checkCycles for the propagation rules).
//
// Not guaranteed: a single engine operation is not interrupted, so a
// template that repeats a string or list an enormous number of times
// ('x' * 10**12) can still exhaust memory, and the cycle check is a
// conservative analysis of the source, not a proof. Templates are trusted
// as much as the model's weights; the limits are against accidents and
// template bugs, not a sandbox for code from users.
//
// Example:
//
//	tmpl, err := chat.New(meta.ChatTemplate, bosText, eosText)
//	if err != nil {
//		return err // the model's template does not parse
//	}
//	prompt, err := tmpl.Render([]chat.Message{{Role: "user", Content: "Hi"}}, true)
//	if errors.Is(err, chat.ErrRejected) {
//		// InvalidArgument: the template refuses this conversation
//	}
package chat
