package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/constrain"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/runtime/toolcall"
	"github.com/weft-inference/weft/scheduler"
)

// OpenAI's Responses API, stateless: POST /v1/responses.
//
// A request is a chat request in another wire shape: instructions and
// input become the conversation (a string input is one user message;
// message items keep their role, developer taken as system;
// function_call items become the tool calls of an assistant message,
// joined to the assistant message right before them; function_call_output
// items become tool messages and must answer an earlier function_call;
// a reasoning item's text is the reasoning of the assistant turn after
// it), and from there it takes chat's path (chatRequests): the same
// template, tools (function tools only; tool_choice none, auto, required
// or {"type": "function", "name": N}, the last two enforced by the
// grammar), structured output (text.format json_schema or json_object),
// template variables (reasoning.effort is reasoning_effort) and reply
// parsing. Without tools (or with tool_choice none) the reply is one
// message as the model wrote it, as on /v1/chat/completions; with tools
// it is read into reasoning, message and function_call output items.
//
// Nothing is stored: store true, previous_response_id, conversation,
// background and prompt are refused with a 400 saying so, as are
// truncation other than "disabled", tools other than functions and input
// parts other than text. metadata is echoed; user is logged. include
// "message.output_text.logprobs" (with top_logprobs, 0 to 20) gives each
// output_text part, and each of its deltas, its tokens' logprobs in
// chat's shape (token, logprob, bytes, top_logprobs), for replies without
// tools (with tools a token's text may be split between items); other
// include values give nothing.
//
// The response's status is "completed", or "incomplete" with
// incomplete_details.reason "max_output_tokens" when generation stopped at
// max_output_tokens (or the context's end); a call cut that way is left
// out of the output. A stream is response.created, response.in_progress,
// then for each output item response.output_item.added, its content
// (response.content_part.added, response.output_text.delta... or
// response.reasoning_text.delta..., their .done events and
// response.content_part.done; or response.function_call_arguments.delta...
// and .done) and response.output_item.done, and last response.completed
// or response.incomplete with the whole response; every event an
// "event:" line and a "data:" line carrying sequence_number. A failure
// after the stream began is an "error" event (code, message, param).
// Requests count in the per-request metrics with door="responses".

// errNotStored ends the message of every refused stateful field.
const errNotStored = "this server stores no responses (stateless /v1/responses): send the whole conversation as input, with store false or absent"

// present reports whether a raw field was sent with a value.
func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

func (h *Handler) responses(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	if err := h.decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	j, resp, err := h.responseJob(r.Context(), &req)
	if err != nil {
		writeError(w, respWireErr(err))
		return
	}
	h.logUser(r, req.User)
	h.runResponse(w, r, j, resp)
}

// responseJob validates, renders and tokenizes a Responses request, and
// returns its job and the response object as it starts (the request's
// settings echoed, no output).
func (h *Handler) responseJob(ctx context.Context, req *responsesRequest) (*job, *respResponse, error) {
	if err := h.checkModel(req.Model); err != nil {
		return nil, nil, err
	}
	if !h.door.HasChat() {
		return nil, nil, errNoChatTemplate
	}
	if err := respStateless(req); err != nil {
		return nil, nil, err
	}
	tools, err := h.respTools(req)
	if err != nil {
		return nil, nil, err
	}
	msgs, src, err := respConversation(req)
	if err != nil {
		return nil, nil, err
	}
	if err := frontdoor.CheckToolMessages(msgs, 0); err != nil {
		return nil, nil, src.rename(err)
	}
	format, formatEcho, err := h.respFormat(req)
	if err != nil {
		return nil, nil, err
	}
	var v chat.Vars
	if req.Reasoning != nil && req.Reasoning.Effort != nil {
		v.ReasoningEffort = *req.Reasoning.Effort
	}
	params := commonParams{Model: req.Model, Temperature: req.Temperature, TopP: req.TopP, Stream: req.Stream, User: req.User}
	lp, err := respLogprobs(req)
	if err != nil {
		return nil, nil, err
	}
	j := &job{id: newID("resp_"), kind: kindResponse, model: req.Model, n: 1, params: params, logprobs: lp}
	if err := h.chatRequests(ctx, j, msgs, tools, v, req.MaxOutputTokens, format); err != nil {
		return nil, nil, err
	}
	if lp.on && j.tools != nil {
		return nil, nil, badParam("include", "message.output_text.logprobs is served for replies without tools (or with tool_choice none)")
	}
	sp := j.prompts[0].reqs[0].Sampling
	resp := &respResponse{
		ID: j.id, Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
		Instructions: req.Instructions, MaxOutputTokens: req.MaxOutputTokens, Model: req.Model, Output: []respItem{},
		ParallelToolCalls: tools == nil || tools.Parallel, Temperature: float64(sp.Temperature), TopP: float64(sp.TopP),
		Text: respTextParam{Format: formatEcho}, ToolChoice: json.RawMessage(`"auto"`), Tools: req.Tools,
		Truncation: "disabled", Metadata: req.Metadata,
	}
	if req.Reasoning != nil {
		resp.Reasoning.Effort = req.Reasoning.Effort
	}
	if present(req.ToolChoice) {
		resp.ToolChoice = req.ToolChoice
	}
	if resp.Tools == nil {
		resp.Tools = []json.RawMessage{}
	}
	if resp.Metadata == nil {
		resp.Metadata = map[string]string{}
	}
	if req.User != "" {
		resp.User = &req.User
	}
	return j, resp, nil
}

// respStateless refuses the fields of the stateful API.
func respStateless(req *responsesRequest) error {
	switch {
	case req.Store != nil && *req.Store:
		return badParam("store", "%s", errNotStored)
	case req.PreviousResponseID != nil && *req.PreviousResponseID != "":
		return badParam("previous_response_id", "%s", errNotStored)
	case present(req.Conversation):
		return badParam("conversation", "%s", errNotStored)
	case req.Background != nil && *req.Background:
		return badParam("background", "background responses are not served: %s", errNotStored)
	case present(req.Prompt):
		return badParam("prompt", "stored prompts are not served; send instructions and input")
	case req.Truncation != nil && *req.Truncation != "disabled":
		return badParam("truncation", "%q: only \"disabled\" is served (an input over the context is refused)", *req.Truncation)
	}
	return nil
}

// respIncludeLogprobs is the include value that asks for output_text's
// logprobs.
const respIncludeLogprobs = "message.output_text.logprobs"

// respLogprobs is what include and top_logprobs ask for (top_logprobs'
// range is the sampler's, checked at Submit).
func respLogprobs(req *responsesRequest) (logprobSpec, error) {
	lp := logprobSpec{on: slices.Contains(req.Include, respIncludeLogprobs)}
	if req.TopLogprobs != nil {
		if !lp.on && *req.TopLogprobs > 0 {
			return lp, badParam("top_logprobs", "needs include %q", respIncludeLogprobs)
		}
		lp.top = *req.TopLogprobs
	}
	return lp, nil
}

// respConversation turns instructions and input into the conversation
// the template renders (no rendering here), checking the items' wire
// shape; the tool calls and results are checked by
// frontdoor.CheckToolMessages (respSource.rename names their items).
func respConversation(req *responsesRequest) ([]chat.Message, respSource, error) {
	var msgs []chat.Message
	var src respSource
	if req.Instructions != nil && *req.Instructions != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: *req.Instructions})
		src = append(src, respLoc{item: -1})
	}
	if !present(req.Input) {
		return nil, nil, badParam("input", "required")
	}
	var s string
	if json.Unmarshal(req.Input, &s) == nil {
		return append(msgs, chat.Message{Role: "user", Content: s}), append(src, respLoc{item: -1}), nil
	}
	var items []respInputItem
	if err := json.Unmarshal(req.Input, &items); err != nil {
		return nil, nil, badParam("input", "want a string or an array of input items")
	}
	if len(items) == 0 {
		return nil, nil, badParam("input", "at least one item is required")
	}
	names := map[string]string{} // call_id -> name, of the function_call items so far
	reasoning := ""              // reasoning items' text, for the assistant turn after them
	for i, it := range items {
		field := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "message", "":
			role := it.Role
			switch role {
			case "user", "system", "assistant":
			case "developer":
				role = "system"
			case "":
				if it.Type == "" {
					return nil, nil, badParam(field+".type", "required: message, function_call, function_call_output or reasoning")
				}
				return nil, nil, badParam(field+".role", "required")
			default:
				return nil, nil, badParam(field+".role", "%q: want user, system, developer or assistant", role)
			}
			text, err := respText(field+".content", it.Content, "input_text", "output_text")
			if err != nil {
				return nil, nil, err
			}
			m := chat.Message{Role: role, Content: text}
			if role == "assistant" {
				m.ReasoningContent, reasoning = reasoning, ""
			}
			msgs = append(msgs, m)
			src = append(src, respLoc{item: i})
		case "function_call":
			c := chat.ToolCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments}
			names[c.ID] = c.Name
			if last := len(msgs) - 1; last >= 0 && msgs[last].Role == "assistant" && reasoning == "" {
				// The calls of the assistant message before them.
				msgs[last].ToolCalls = append(msgs[last].ToolCalls, c)
				src[last].calls = append(src[last].calls, i)
			} else {
				msgs = append(msgs, chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{c}, ReasoningContent: reasoning})
				src = append(src, respLoc{item: i, calls: []int{i}})
				reasoning = ""
			}
		case "function_call_output":
			out, err := respText(field+".output", it.Output, "input_text")
			if err != nil {
				return nil, nil, err
			}
			msgs = append(msgs, chat.Message{Role: "tool", ToolCallID: it.CallID, Name: names[it.CallID], Content: out})
			src = append(src, respLoc{item: i})
		case "reasoning":
			text, err := respText(field+".content", it.Content, "reasoning_text")
			if err != nil {
				return nil, nil, err
			}
			if text == "" {
				for _, p := range it.Summary {
					if p.Text != nil {
						text += *p.Text
					}
				}
			}
			reasoning += text
		case "item_reference":
			return nil, nil, badParam(field+".type", "item_reference: %s", errNotStored)
		default:
			return nil, nil, badParam(field+".type", "%q is not served (message, function_call, function_call_output, reasoning)", it.Type)
		}
	}
	return msgs, src, nil
}

// respSource says where each message of a conversation came from: the
// input item of a message or a function_call_output (-1: instructions or
// a string input), and the function_call items of its tool calls.
type respSource []respLoc

type respLoc struct {
	item  int
	calls []int
}

// rename turns frontdoor.CheckToolMessages' field names, which name
// messages and their tool calls in Chat Completions' words, into the
// input items and their fields; other errors are returned as they are.
func (src respSource) rename(err error) error {
	var fe *frontdoor.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	var i, k int
	var rest string
	switch {
	case scanField(fe.Field, "messages[%d].tool_calls[%d].%s", &i, &k, &rest) && i < len(src) && k < len(src[i].calls):
		name := map[string]string{"id": "call_id", "function.name": "name", "function.arguments": "arguments"}[rest]
		if name == "" {
			name = rest
		}
		return badParam(fmt.Sprintf("input[%d].%s", src[i].calls[k], name), "%s", fe.Msg)
	case scanField(fe.Field, "messages[%d].tool_call_id", &i) && i < len(src) && src[i].item >= 0:
		return badParam(fmt.Sprintf("input[%d].call_id", src[i].item), "%s", strings.Replace(fe.Msg, "tool call of an earlier assistant message", "function_call item before it", 1))
	}
	return err
}

// scanField reports whether field has the form of format, filling args.
func scanField(field, format string, args ...any) bool {
	n, err := fmt.Sscanf(field, format, args...)
	return err == nil && n == len(args)
}

// respText decodes a content value: absent, a string, or an array of
// parts of the given types, their texts concatenated.
func respText(field string, raw json.RawMessage, types ...string) (string, error) {
	if !present(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []respTextPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badParam(field, "want a string or an array of %s parts", strings.Join(types, " or "))
	}
	var b strings.Builder
	for k, p := range parts {
		ok := false
		for _, t := range types {
			ok = ok || p.Type == t
		}
		if !ok {
			return "", badParam(fmt.Sprintf("%s[%d].type", field, k), "%q is not served here (want %s)", p.Type, strings.Join(types, " or "))
		}
		if p.Text == nil {
			return "", badParam(fmt.Sprintf("%s[%d].text", field, k), "required")
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// respTools decodes tools and tool_choice (the Responses shapes: a
// function's fields at the tool's top level; tool_choice none, auto,
// required or {"type": "function", "name": N}) and has the Door check them
// (frontdoor.Door.ToolSpec); the template gets each tool in Chat
// Completions' shape. nil when the request has no tools.
func (h *Handler) respTools(req *responsesRequest) (*frontdoor.ToolSpec, error) {
	choice, named := frontdoor.ToolChoiceAuto, ""
	if present(req.ToolChoice) {
		if c, isString, err := toolChoiceMode(req.ToolChoice); isString {
			if err != nil {
				return nil, err
			}
			choice = c
		} else {
			var c respToolChoice
			if err := json.Unmarshal(req.ToolChoice, &c); err != nil || c.Type != "function" {
				return nil, badParam("tool_choice", `want none, auto, required or {"type": "function", "name": ...}`)
			}
			choice, named = frontdoor.ToolChoiceNamed, c.Name
		}
	}
	parallel := true
	if req.ParallelToolCalls != nil {
		parallel = *req.ParallelToolCalls
	}
	defs := make([]frontdoor.ToolDef, len(req.Tools))
	for i, raw := range req.Tools {
		field := fmt.Sprintf("tools[%d]", i)
		var t respTool
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, badParam(field, "want a tool object: %v", err)
		}
		if t.Type != "function" {
			return nil, badParam(field+".type", "%q is not served (only \"function\": this server runs no hosted tools)", t.Type)
		}
		defs[i] = frontdoor.ToolDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
	}
	s, err := h.door.ToolSpec(defs, choice, named, parallel)
	var fe *frontdoor.FieldError
	if errors.As(err, &fe) && strings.HasPrefix(fe.Field, "tools[") {
		// A tool's fields are at its top level here, not under "function".
		return nil, badParam(strings.Replace(fe.Field, ".function.", ".", 1), "%s", fe.Msg)
	}
	return s, err
}

// respFormat compiles text.format (nil: free text) and returns it as the
// response echoes it.
func (h *Handler) respFormat(req *responsesRequest) (sample.Constraint, json.RawMessage, error) {
	echo := json.RawMessage(`{"type":"text"}`)
	if req.Text == nil || !present(req.Text.Format) {
		return nil, echo, nil
	}
	var tf respTextFormat
	if err := json.Unmarshal(req.Text.Format, &tf); err != nil {
		return nil, nil, badParam("text.format", "want a format object")
	}
	var f constrain.Format
	switch tf.Type {
	case "text":
		return nil, req.Text.Format, nil
	case "json_object":
		f.JSONObject = true
	case "json_schema":
		if !present(tf.Schema) {
			return nil, nil, badParam("text.format.schema", "required")
		}
		f.JSONSchema = string(tf.Schema)
	default:
		return nil, nil, badParam("text.format.type", "%q: want text, json_object or json_schema", tf.Type)
	}
	c, err := h.compileFormat("text.format", f)
	return c, req.Text.Format, err
}

// respWireErr renames the owners' field names in err to this endpoint's
// parameters: max_tokens is max_output_tokens; the prompt and the chat
// contents are input.
func respWireErr(err error) error {
	var le *scheduler.LimitError
	if errors.As(err, &le) {
		c := *le
		switch le.Field {
		case "max_tokens":
			c.Field = "max_output_tokens"
		case "prompt":
			c.Field = "input"
		}
		return &c
	}
	var be *frontdoor.BytesError
	if errors.As(err, &be) {
		c := *be
		c.Field = "input"
		return &c
	}
	var te *frontdoor.TemplateError
	if errors.As(err, &te) {
		return &requestError{status: http.StatusBadRequest, code: "invalid_value", param: "input", msg: "input: " + te.Error()}
	}
	return err
}

// runResponse submits the job's one sequence and writes the response: one
// JSON object, or the stream of events. When the client goes away the
// sequence is cancelled (it leaves the batch at the next step).
func (h *Handler) runResponse(w http.ResponseWriter, r *http.Request, j *job, resp *respResponse) {
	start := time.Now()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	updates := make(chan update)
	c := &choice{}
	if j.tools != nil {
		c.reply = &reply{h.door.NewReply(j.tools, j.prompts[0].reqs[0].Prompt, frontdoor.ReplyOptions{})}
	}
	st, err := h.cfg.Scheduler.Submit(ctx, j.prompts[0].reqs[0])
	if err != nil {
		writeError(w, j.wireErr(err))
		return
	}
	c.st = st
	h.follow(ctx, j, c, start, updates)
	out := &writer{ctx: ctx, h: h, w: w, rc: http.NewResponseController(w), j: j, created: resp.CreatedAt, stall: h.door.SendStallTimeout()}
	defer out.rc.SetWriteDeadline(time.Time{})
	b := &respBuilder{}
	if j.params.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		b.emit = func(ev *respEvent) error {
			data, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			buf := make([]byte, 0, len(data)+len(ev.Type)+16)
			buf = append(buf, "event: "...)
			buf = append(buf, ev.Type...)
			buf = append(buf, "\ndata: "...)
			buf = append(buf, data...)
			buf = append(buf, "\n\n"...)
			return out.rawBytes(buf)
		}
		if b.send(&respEvent{Type: "response.created", Response: resp}) != nil ||
			b.send(&respEvent{Type: "response.in_progress", Response: resp}) != nil {
			return
		}
	}
	fail := func(err error) {
		err = j.wireErr(err)
		if !j.params.Stream {
			writeError(w, err)
			return
		}
		e := apiErrorOf(err)
		b.send(&respEvent{Type: "error", Code: e.Code, Message: e.Message, Param: e.Param})
	}
	for {
		var u update
		select {
		case u = <-updates:
		case <-ctx.Done():
			return // the client left; the reader cancels the sequence
		}
		if u.err != nil {
			fail(u.err)
			return
		}
		d := h.add(j, c, u.ev)
		if c.reply != nil {
			err = b.apply(d.events)
		} else if d.text != "" || len(d.chatLP) > 0 {
			err = b.write("message", d.text, d.chatLP)
		}
		if err != nil {
			return
		}
		f := u.ev.Final
		if f == nil {
			continue
		}
		fr := finishReason(f)
		if fr == "" {
			fail(finalErr(f))
			return
		}
		if c.reply != nil {
			if fr, err = c.reply.finishReason(f, fr); err != nil {
				h.log.WarnContext(ctx, "openai: malformed tool call", "request", j.id, "err", err)
				fail(err)
				return
			}
		}
		resp.Status = "completed"
		if fr == "length" {
			resp.Status = "incomplete"
			resp.IncompleteDetails = &respIncomplete{Reason: "max_output_tokens"}
		}
		if b.finish(resp.Status) != nil {
			return
		}
		resp.Output = b.output()
		resp.Usage = &respUsage{InputTokens: f.PromptTokens, OutputTokens: f.CompletionTokens, TotalTokens: f.PromptTokens + f.CompletionTokens}
		resp.Usage.InputTokensDetails.CachedTokens = f.CachedTokens
		if c.reply != nil {
			resp.Usage.OutputTokensDetails.ReasoningTokens = c.reply.ReasoningTokens
		}
		if j.params.Stream {
			b.send(&respEvent{Type: "response." + resp.Status, Response: resp})
			return
		}
		body, err := json.Marshal(resp)
		if err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		out.rawBytes(append(body, '\n'))
		return
	}
}

// respBuilder turns a reply's events into output items and, when
// streaming (emit set), into the stream's events. One item is open at a
// time: text of another kind, or a call, closes it.
type respBuilder struct {
	items []respItem
	text  []strings.Builder    // each item's text (message, reasoning) or arguments (function_call)
	lps   [][]chatTokenLogprob // each message's logprobs (include asked for them)
	drop  []bool               // a call cut off: announced in the stream, left out of the output
	open  int                  // the open item's index + 1; 0: none
	seq   int
	emit  func(*respEvent) error // nil: not streaming
}

// send numbers ev and emits it (nothing when not streaming).
func (b *respBuilder) send(ev *respEvent) error {
	if b.emit == nil {
		return nil
	}
	ev.SequenceNumber = b.seq
	b.seq++
	return b.emit(ev)
}

func ptr[T any](v T) *T { return &v }

// itemEvent is an event of item i (output_item.added or .done).
func (b *respBuilder) itemEvent(typ string, i int) error {
	return b.send(&respEvent{Type: typ, OutputIndex: ptr(i), Item: &b.items[i]})
}

// partEvent is an event of item i's one content part.
func (b *respBuilder) partEvent(typ string, i int, part *respPart) error {
	return b.send(&respEvent{Type: typ, ItemID: b.items[i].ID, OutputIndex: ptr(i), ContentIndex: ptr(0), Part: part})
}

// textPart is the content part of a message (with its logprobs) or
// reasoning item.
func textPart(itemType, text string, lps []chatTokenLogprob) respPart {
	if itemType == "reasoning" {
		return respPart{Type: "reasoning_text", Text: text}
	}
	return respPart{Type: "output_text", Text: text, Annotations: &[]string{}, Logprobs: logprobList(lps)}
}

// logprobList is lps as the wire writes it: a list, empty when none.
func logprobList(lps []chatTokenLogprob) *[]chatTokenLogprob {
	if lps == nil {
		lps = []chatTokenLogprob{}
	}
	return &lps
}

// add opens a new item.
func (b *respBuilder) add(it respItem) (int, error) {
	b.items = append(b.items, it)
	b.text = append(b.text, strings.Builder{})
	b.lps = append(b.lps, nil)
	b.drop = append(b.drop, false)
	i := len(b.items) - 1
	b.open = i + 1
	return i, b.itemEvent("response.output_item.added", i)
}

// write adds text (and, to a message, the logprobs of its tokens) to the
// open message or reasoning item (itemType), opening one first when
// another kind of item is open, or none.
func (b *respBuilder) write(itemType, text string, lps []chatTokenLogprob) error {
	if b.open == 0 || b.items[b.open-1].Type != itemType {
		if err := b.close("completed"); err != nil {
			return err
		}
		it := respItem{ID: newID("msg_"), Type: itemType, Status: "in_progress", Content: &[]respPart{}}
		if itemType == "message" {
			it.Role = "assistant"
		} else {
			it.ID = newID("rs_")
			it.Summary = &[]respPart{}
		}
		i, err := b.add(it)
		if err != nil {
			return err
		}
		p := textPart(itemType, "", nil)
		if err := b.partEvent("response.content_part.added", i, &p); err != nil {
			return err
		}
	}
	i := b.open - 1
	if text == "" && len(lps) == 0 {
		return nil
	}
	b.text[i].WriteString(text)
	b.lps[i] = append(b.lps[i], lps...)
	ev := &respEvent{Type: "response.output_text.delta", ItemID: b.items[i].ID, OutputIndex: ptr(i), ContentIndex: ptr(0), Delta: &text}
	if itemType == "reasoning" {
		ev.Type = "response.reasoning_text.delta"
	} else {
		ev.Logprobs = logprobList(lps)
	}
	return b.send(ev)
}

// close ends the open item, if any, with status: a text item's done
// events; a call still open was cut off (it is dropped from the output).
func (b *respBuilder) close(status string) error {
	if b.open == 0 {
		return nil
	}
	i := b.open - 1
	b.open = 0
	it := &b.items[i]
	it.Status = status
	if it.Type == "function_call" {
		b.drop[i] = true
		it.Status = "incomplete"
		return b.itemEvent("response.output_item.done", i)
	}
	text := b.text[i].String()
	p := textPart(it.Type, text, b.lps[i])
	it.Content = &[]respPart{p}
	ev := &respEvent{Type: "response.output_text.done", ItemID: it.ID, OutputIndex: ptr(i), ContentIndex: ptr(0), Text: &text}
	if it.Type == "reasoning" {
		ev.Type = "response.reasoning_text.done"
	} else {
		ev.Logprobs = logprobList(b.lps[i])
	}
	if err := b.send(ev); err != nil {
		return err
	}
	if err := b.partEvent("response.content_part.done", i, &p); err != nil {
		return err
	}
	return b.itemEvent("response.output_item.done", i)
}

// apply takes a reply's events.
func (b *respBuilder) apply(evs []toolcall.Event) error {
	for _, ev := range evs {
		var err error
		switch ev.Kind {
		case toolcall.Content:
			err = b.write("message", ev.Text, nil)
		case toolcall.Reasoning:
			err = b.write("reasoning", ev.Text, nil)
		case toolcall.CallStart:
			if err = b.close("completed"); err == nil {
				_, err = b.add(respItem{ID: newID("fc_"), Type: "function_call", Status: "in_progress",
					CallID: ev.ID, Name: ev.Name, Arguments: ptr("")})
			}
		case toolcall.CallArgs:
			if i := b.open - 1; i >= 0 && b.items[i].Type == "function_call" {
				b.text[i].WriteString(ev.Text)
				err = b.send(&respEvent{Type: "response.function_call_arguments.delta", ItemID: b.items[i].ID, OutputIndex: ptr(i), Delta: &ev.Text})
			}
		case toolcall.CallEnd:
			if i := b.open - 1; i >= 0 && b.items[i].Type == "function_call" {
				b.open = 0
				it := &b.items[i]
				args := b.text[i].String()
				it.Arguments, it.Status = &args, "completed"
				err = b.send(&respEvent{Type: "response.function_call_arguments.done", ItemID: it.ID, OutputIndex: ptr(i), Arguments: &args, Name: it.Name})
				if err == nil {
					err = b.itemEvent("response.output_item.done", i)
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// finish closes the open item with status (the response's) and, when the
// reply wrote nothing, gives it one empty message.
func (b *respBuilder) finish(status string) error {
	if len(b.items) == 0 {
		if err := b.write("message", "", nil); err != nil {
			return err
		}
	}
	return b.close(status)
}

// output is the response's output items.
func (b *respBuilder) output() []respItem {
	out := make([]respItem, 0, len(b.items))
	for i, it := range b.items {
		if !b.drop[i] {
			out = append(out, it)
		}
	}
	return out
}
