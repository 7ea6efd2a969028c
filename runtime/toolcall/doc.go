// Package toolcall turns a model's streamed output text into three streams:
// content, reasoning and tool calls. It knows how each family of models
// writes them (a Format), reads the text as it is generated, piece by piece,
// and sends events a door can put on the wire as they come: OpenAI's
// streaming shape (a call's id and name first, then its arguments in
// fragments by index) maps onto them one to one.
//
// It sits in runtime and imports nothing of the doors, the scheduler or the
// engine. The doors (through internal/frontdoor) make one Parser per reply,
// push each detokenized piece, and call Finish when generation stops.
//
// # Events and their rules
//
// Push and Finish return Events: Content and Reasoning deltas (Text),
// CallStart (Index, ID, Name), CallArgs (Index, Text), CallEnd (Index) and
// CallFailed (Index, Err). For every reply:
//
//   - Calls are numbered 0, 1, ... in order; a call's CallStart comes before
//     its CallArgs, and calls do not interleave: CallEnd (or CallFailed) closes
//     one before the next opens.
//   - The CallArgs fragments of a call, concatenated, are exactly its
//     arguments, one JSON object; when CallEnd comes, they parse. Arguments
//     the model wrote as JSON are passed through byte for byte (checked as
//     they stream by an incremental JSON checker); formats that write
//     arguments as text build the object as they go.
//   - No delta ends inside a UTF-8 sequence whose rest is still to come.
//   - The pieces do not matter: any cut of the same text into pieces, down
//     to single bytes and through multi-byte markers, gives the same
//     deltas once merged (each stream's deltas concatenated, the calls'
//     fields). Text that may still turn out to be a marker is held until
//     it can be decided, so a delta may come a few pieces late; a held
//     marker prefix is never sent as content.
//   - After CallFailed nothing follows; Finish returns its error.
//
// Whitespace that templates put around blocks belongs to neither side: it
// is dropped right before a call or reasoning marker, at the start of
// reasoning, and at the start of content after a reasoning block or a call.
//
// The text must be detokenized with special tokens written out (the markers
// of most formats, <|channel|>, [TOOL_CALLS], <｜tool▁sep｜>, are special
// tokens); the end-of-turn token itself need not be.
//
// # Formats
//
// Detect picks a format from the chat template's source (the first rule
// that matches wins); ParseFormat takes an operator's override by name.
//
//	name           templates                           detected by
//	harmony        gpt-oss                             <|channel|> and <|message|>
//	deepseek-dsml  DeepSeek V3.2, V4                   ｜DSML｜
//	deepseek       DeepSeek R1 and distills, V3/V3.1   <｜tool▁call▁begin｜>
//	qwen3-coder    Qwen3-Coder, Qwen3.5, Nemotron 3    <function= and <tool_call>
//	hermes         Hermes 2/3, Qwen2.5/3, QwQ          <tool_call> with "name": inside
//	mistral        Nemo, Small 3.x, Devstral, Ministral [TOOL_CALLS]
//	llama3         Llama 3.1-3.3                       <|python_tag|>, or its JSON instruction
//	generic        anything else                       -
//
// What a format reads as a call, and where (a marker that is a special
// token counts wherever it appears; a marker the model could also write as
// plain text counts only where the template puts it, so that a call shown
// in an answer, or explained, is content):
//
//   - hermes: <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>,
//     one block per call, at the start of a line outside a ``` fence. The
//     arguments may also be "parameters", or a string holding the object;
//     keys may come in any order. A <think> block at the reply's start is
//     reasoning.
//   - qwen3-coder: <tool_call>\n<function=N>\n<parameter=P>\nvalue\n</parameter>
//     ...</function>\n</tool_call>, placed as hermes. Values are text: one
//     the tool's schema (Options.Tools) types as a string becomes a JSON
//     string, streamed; any other is held to its end and written as JSON
//     when it is JSON (True/False/None, as the template writes booleans,
//     count), else as a string. <think> as hermes.
//   - llama3: the whole reply is {"name": N, "parameters": {...}} (Llama
//     3.2 may put "type": "function" first), possibly several separated by
//     ';'; a reply starting otherwise is content. <|python_tag|> starts
//     ipython output: a JSON call, a built-in N.call(k="v", ...), or code
//     (a call to "python" with {"code": ...}); the last two are read at
//     the end of the output.
//   - mistral: [TOOL_CALLS] then a JSON array of call objects (Nemo) or
//     N[ARGS]{...}, with [CALL_ID]id before [ARGS] in Small 3.2; parallel
//     calls repeat [TOOL_CALLS]. [THINK]...[/THINK] is reasoning. Default
//     ids are 9 letters and digits, the only ids its templates accept back.
//   - harmony: messages <|channel|>C<|message|>...<|end|>, each after
//     <|start|>assistant but the first (the prompt ends with it). analysis
//     is reasoning, final and commentary without a recipient are content,
//     a message with to=functions.N (before or after the channel) is a call
//     whose body is the arguments, ended by <|call|>.
//   - deepseek: <｜tool▁calls▁begin｜> blocks of <｜tool▁call▁begin｜>HEAD
//     <｜tool▁sep｜>... <｜tool▁call▁end｜>: R1 writes the type as HEAD and the
//     name on the next line, then the arguments in a ```json fence; V3.1
//     writes the name as HEAD and the arguments right after. <think> as
//     hermes.
//   - deepseek-dsml: <｜DSML｜function_calls> (V4: tool_calls) blocks of
//     <｜DSML｜invoke name="N"> with <｜DSML｜parameter name="P"
//     string="true|false">value</｜DSML｜parameter>; string="true" values are
//     strings, others JSON. <think> as hermes.
//   - generic: the fallback system prompt asks for the whole reply to be
//     {"tool_calls": [{"name": N, "arguments": {...}}, ...]} when calling;
//     only a reply starting (after whitespace and a <think> block) with
//     '{' and the key "tool_calls" is read as calls.
//
// # Reasoning
//
// Reasoning blocks are <think>...</think> at the reply's start (hermes,
// qwen3-coder, deepseek, deepseek-dsml, generic), [THINK]...[/THINK]
// (mistral) and harmony's analysis channel. When the generation prompt
// already opened the block (Qwen3 and Qwen3.5 with thinking on, QwQ, the R1
// distills, DeepSeek with thinking on), set Options.InReasoning, for which
// OpensReasoning reads the rendered prompt. Options.RawReasoning leaves the
// text as written: markers and all go to content (harmony's analysis text
// goes to content without its markers, which are special tokens).
//
// # Errors
//
// A call the model began but did not finish correctly is never turned into
// content: the parser sends CallFailed with a *CallError (index, name when
// known, whether the output was cut off, the reason, the text near it) and
// reads no further; Finish returns the same error. The call's CallStart and
// some CallArgs may already be out. What the door does with it:
//
//   - Truncated, and generation stopped at max_tokens: the reply's
//     finish_reason is "length". Complete calls stand; the cut one is left
//     out of a non-streamed message (a streaming client has its fragments,
//     and the "length" finish tells it they are incomplete).
//   - Otherwise (malformed, or cut by a stop string): the model broke its
//     format. When the grammar enforced the call syntax this cannot happen;
//     without enforcement the door fails the request with a server error
//     that names the call and the reason (and logs the text near it),
//     rather than hand the client arguments that do not parse.
//
// Text that does not open a call in the format's rules is content, never an
// error. Names are checked to be names (letters, digits, _ - . :), not
// checked against the request's tools: the door does that, as it validates
// the arguments against the schema.
//
// # Example
//
//	f := toolcall.Detect(templateSource) // or toolcall.ParseFormat(flag)
//	p := toolcall.NewParser(f, toolcall.Options{
//		InReasoning: toolcall.OpensReasoning(f, prompt),
//		Tools:       tools,
//	})
//	for piece := range pieces {
//		for _, ev := range p.Push(piece) {
//			send(ev) // Content -> delta.content, Reasoning -> delta.reasoning_content,
//			// CallStart -> tool_calls[{index, id, type, function.name}],
//			// CallArgs -> tool_calls[{index, function.arguments}]
//		}
//	}
//	evs, err := p.Finish()
//
// A Parser belongs to one reply and one goroutine.
package toolcall
