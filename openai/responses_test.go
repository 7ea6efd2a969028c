package openai

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/scheduler"
)

const (
	respInstructions = "You tell stories."
	respUser         = "Tell me about a cat."
)

func (f *fixture) respParams(maxTokens int64) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:           shared.ResponsesModel(f.model),
		Instructions:    oai.String(respInstructions),
		Input:           responses.ResponseNewParamsInputUnion{OfString: oai.String(respUser)},
		MaxOutputTokens: oai.Int(maxTokens),
		Temperature:     oai.Float(0),
	}
}

// streamed is what a Responses stream carried, as a client reads it.
type streamed struct {
	types []string // the event types, consecutive repeats once
	final *responses.Response
	text  string // the output_text deltas, concatenated
	// logprobs are the output_text deltas' logprobs, concatenated.
	logprobs []responses.ResponseOutputTextLogprob
	args     map[string]string // item id -> its function_call_arguments deltas, concatenated
	errs     []responses.ResponseStreamEventUnion
}

// toTop converts a delta event's alternatives to the output part's type.
func toTop(in []responses.ResponseTextDeltaEventLogprobTopLogprob) []responses.ResponseOutputTextLogprobTopLogprob {
	out := make([]responses.ResponseOutputTextLogprobTopLogprob, len(in))
	for i, a := range in {
		out[i] = responses.ResponseOutputTextLogprobTopLogprob{Token: a.Token, Logprob: a.Logprob}
	}
	return out
}

// readStream reads a stream to its end, checking the sequence numbers
// (0, 1, 2, ...), and that each item's done events repeat what its deltas
// said.
func readStream(t *testing.T, s interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) streamed {
	t.Helper()
	out := streamed{args: map[string]string{}}
	var seq int64
	itemText := map[string]string{}
	for s.Next() {
		ev := s.Current()
		if ev.SequenceNumber != seq {
			t.Fatalf("event %s: sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		if len(out.types) == 0 || out.types[len(out.types)-1] != ev.Type {
			out.types = append(out.types, ev.Type)
		}
		switch ev.Type {
		case "response.output_text.delta", "response.reasoning_text.delta":
			itemText[ev.ItemID] += ev.Delta
			if ev.Type == "response.output_text.delta" {
				out.text += ev.Delta
				for _, lp := range ev.AsResponseOutputTextDelta().Logprobs {
					out.logprobs = append(out.logprobs, responses.ResponseOutputTextLogprob{Token: lp.Token, Logprob: lp.Logprob,
						TopLogprobs: toTop(lp.TopLogprobs)})
				}
			}
		case "response.output_text.done", "response.reasoning_text.done":
			if ev.Text != itemText[ev.ItemID] {
				t.Errorf("%s of %s: text %q, the deltas said %q", ev.Type, ev.ItemID, ev.Text, itemText[ev.ItemID])
			}
		case "response.function_call_arguments.delta":
			out.args[ev.ItemID] += ev.Delta
		case "response.function_call_arguments.done":
			if ev.Arguments != out.args[ev.ItemID] {
				t.Errorf("arguments.done of %s: %q, the deltas said %q", ev.ItemID, ev.Arguments, out.args[ev.ItemID])
			}
		case "response.completed", "response.incomplete":
			r := ev.Response
			out.final = &r
		case "error":
			out.errs = append(out.errs, ev)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestResponses: a greedy request, non-streamed and streamed, gives the
// same response; its tokens (with their logprobs and the two most likely
// alternatives), text and usage are those of the same conversation
// through /v1/chat/completions.
func TestResponses(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	const maxTokens = 24
	params := f.respParams(maxTokens)
	params.Include = []responses.ResponseIncludable{responses.ResponseIncludableMessageOutputTextLogprobs}
	params.TopLogprobs = oai.Int(2)
	got, err := f.client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.ID, "resp_") || got.Object != "response" || string(got.Model) != f.model || got.CreatedAt == 0 {
		t.Errorf("id %q, object %q, model %q, created_at %v", got.ID, got.Object, got.Model, got.CreatedAt)
	}
	if len(got.Output) != 1 || got.Output[0].Type != "message" || got.Output[0].Role != "assistant" || got.OutputText() == "" {
		t.Fatalf("output %+v: want one assistant message with text", got.Output)
	}

	cc, err := f.client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{
		Model:               oai.ChatModel(f.model),
		Messages:            []oai.ChatCompletionMessageParamUnion{oai.SystemMessage(respInstructions), oai.UserMessage(respUser)},
		MaxCompletionTokens: oai.Int(maxTokens),
		Temperature:         oai.Float(0),
		Logprobs:            oai.Bool(true),
		TopLogprobs:         oai.Int(2),
	})
	if err != nil {
		t.Fatal(err)
	}
	// A token and its alternatives, logprobs to 1e-4 (the second request's
	// prompt comes from the prefix cache).
	type tok struct {
		Token   string
		Logprob float64
		Top     []string
	}
	approx := cmpopts.EquateApprox(0, 1e-4)
	var wantToks []tok
	for _, lp := range cc.Choices[0].Logprobs.Content {
		tk := tok{Token: lp.Token, Logprob: lp.Logprob}
		for _, a := range lp.TopLogprobs {
			tk.Top = append(tk.Top, a.Token)
		}
		wantToks = append(wantToks, tk)
	}
	respToks := func(lps []responses.ResponseOutputTextLogprob) []tok {
		var out []tok
		for _, lp := range lps {
			tk := tok{Token: lp.Token, Logprob: lp.Logprob}
			for _, a := range lp.TopLogprobs {
				tk.Top = append(tk.Top, a.Token)
			}
			out = append(out, tk)
		}
		return out
	}
	if len(wantToks) != int(cc.Usage.CompletionTokens) {
		t.Fatalf("chat: %d logprobs for %d tokens", len(wantToks), cc.Usage.CompletionTokens)
	}
	if diff := cmp.Diff(wantToks, respToks(got.Output[0].Content[0].Logprobs), approx); diff != "" {
		t.Errorf("tokens of /v1/responses against /v1/chat/completions (-chat +responses):\n%s", diff)
	}
	type summary struct {
		Text, Status, Incomplete string
		Input, Output, Total     int64
	}
	status := map[string]string{"length": "incomplete", "stop": "completed"}[cc.Choices[0].FinishReason]
	incomplete := map[string]string{"length": "max_output_tokens"}[cc.Choices[0].FinishReason]
	want := summary{cc.Choices[0].Message.Content, status, incomplete, cc.Usage.PromptTokens, cc.Usage.CompletionTokens, cc.Usage.TotalTokens}
	sum := func(r *responses.Response) summary {
		return summary{r.OutputText(), string(r.Status), string(r.IncompleteDetails.Reason),
			r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.TotalTokens}
	}
	if diff := cmp.Diff(want, sum(got)); diff != "" {
		t.Errorf("/v1/responses against /v1/chat/completions (-chat +responses):\n%s", diff)
	}

	st := readStream(t, f.client.Responses.NewStreaming(ctx, params))
	wantTypes := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response." + status}
	if diff := cmp.Diff(wantTypes, st.types); diff != "" {
		t.Errorf("event sequence (-want +got):\n%s", diff)
	}
	if st.final == nil {
		t.Fatal("no final response")
	}
	if diff := cmp.Diff(want, sum(st.final)); diff != "" {
		t.Errorf("streamed response (-chat +streamed):\n%s", diff)
	}
	if st.text != want.Text {
		t.Errorf("streamed deltas %q, want %q", st.text, want.Text)
	}
	if diff := cmp.Diff(wantToks, respToks(st.logprobs), approx); diff != "" {
		t.Errorf("streamed deltas' tokens (-chat +streamed):\n%s", diff)
	}
	if diff := cmp.Diff(wantToks, respToks(st.final.Output[0].Content[0].Logprobs), approx); diff != "" {
		t.Errorf("streamed final's tokens (-chat +streamed):\n%s", diff)
	}
}

// TestResponsesWire reads a stream's bytes: each event an "event:" line
// and a "data:" line whose JSON has that type.
func TestResponsesWire(t *testing.T) {
	f := newFixture(t, false)
	body := `{"model":"` + f.model + `","input":"hi","max_output_tokens":4,"temperature":0,"stream":true,"metadata":{"k":"v"}}`
	req, _ := http.NewRequestWithContext(t.Context(), "POST", f.srv.URL+"/v1/responses", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var last map[string]any
	for sc.Scan() {
		name, ok := strings.CutPrefix(sc.Text(), "event: ")
		if !ok {
			t.Fatalf("line %q, want an event: line", sc.Text())
		}
		if !sc.Scan() {
			t.Fatalf("event %s without data", name)
		}
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		last = nil
		if !ok || json.Unmarshal([]byte(data), &last) != nil || last["type"] != name {
			t.Fatalf("event %s: data line %q, want JSON of that type", name, sc.Text())
		}
		if sc.Scan() && sc.Text() != "" {
			t.Fatalf("event %s: %q after the data line, want a blank line", name, sc.Text())
		}
	}
	r, _ := last["response"].(map[string]any)
	if r == nil || r["store"] != false || !cmp.Equal(r["metadata"], map[string]any{"k": "v"}) {
		t.Errorf("last event's response %v: want store false, metadata echoed", r)
	}
	u, _ := r["usage"].(map[string]any)
	if u == nil || u["output_tokens"] == nil || u["output_tokens_details"] == nil || u["input_tokens_details"] == nil {
		t.Errorf("usage %v", u)
	}
}

func respTools(t *testing.T) []responses.ToolUnionParam {
	var w, c map[string]any
	if json.Unmarshal([]byte(weatherSchema), &w) != nil || json.Unmarshal([]byte(clockSchema), &c) != nil {
		t.Fatal("schemas")
	}
	weather := responses.ToolParamOfFunction("get_weather", w, true)
	weather.OfFunction.Description = oai.String("The weather in a city.")
	return []responses.ToolUnionParam{weather, responses.ToolParamOfFunction("get_time", c, false)}
}

// TestResponsesTools: with tool_choice required (Qwen3's template on
// stories260K, hermes), the output is one function_call whose arguments
// validate, streamed and not alike; its output sent back as a
// function_call_output item reaches the template, and the next reply is
// a message.
func TestResponsesTools(t *testing.T) {
	f := newToolFixture(t)
	ctx := t.Context()
	schemas := map[string]*jsonschema.Schema{"get_weather": compileSchema(t, weatherSchema), "get_time": compileSchema(t, clockSchema)}
	for _, choice := range []responses.ResponseNewParamsToolChoiceUnion{
		{OfToolChoiceMode: oai.Opt(responses.ToolChoiceOptionsRequired)},
		{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "get_time"}},
	} {
		params := responses.ResponseNewParams{
			Model:             shared.ResponsesModel(f.model),
			Input:             responses.ResponseNewParamsInputUnion{OfString: oai.String("What is the weather in Paris?")},
			Tools:             respTools(t),
			ToolChoice:        choice,
			ParallelToolCalls: oai.Bool(false),
			MaxOutputTokens:   oai.Int(400),
			Temperature:       oai.Float(0),
		}
		got, err := f.client.Responses.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != "completed" || len(got.Output) != 1 || got.Output[0].Type != "function_call" {
			t.Fatalf("status %q, output %+v: want completed, one function_call", got.Status, got.Output)
		}
		call := got.Output[0].AsFunctionCall()
		if !strings.HasPrefix(call.CallID, "call_") || !strings.HasPrefix(call.ID, "fc_") || string(call.Status) != "completed" {
			t.Errorf("call_id %q, id %q, status %q", call.CallID, call.ID, call.Status)
		}
		if choice.OfFunctionTool != nil && call.Name != "get_time" {
			t.Errorf("called %q, want get_time", call.Name)
		}
		checkCall(t, schemas, call.Name, call.Arguments)

		st := readStream(t, f.client.Responses.NewStreaming(ctx, params))
		wantTypes := []string{"response.created", "response.in_progress", "response.output_item.added",
			"response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done", "response.completed"}
		if diff := cmp.Diff(wantTypes, st.types); diff != "" {
			t.Errorf("event sequence (-want +got):\n%s", diff)
		}
		if st.final == nil || len(st.final.Output) != 1 {
			t.Fatalf("final %+v", st.final)
		}
		sc := st.final.Output[0].AsFunctionCall()
		type flat struct{ Name, Args, Streamed string }
		if diff := cmp.Diff(flat{call.Name, call.Arguments, call.Arguments}, flat{sc.Name, sc.Arguments, st.args[sc.ID]}); diff != "" {
			t.Errorf("streamed call (-non-streamed +streamed):\n%s", diff)
		}
		if got.Usage.OutputTokens != st.final.Usage.OutputTokens || got.Usage.OutputTokensDetails.ReasoningTokens != 0 {
			t.Errorf("usage %+v, streamed %+v", got.Usage, st.final.Usage)
		}
	}

	// The round trip: the call and its output as input items.
	params := responses.ResponseNewParams{
		Model:           shared.ResponsesModel(f.model),
		Input:           responses.ResponseNewParamsInputUnion{OfString: oai.String("What is the weather in Paris?")},
		Tools:           respTools(t),
		ToolChoice:      responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "get_weather"}},
		MaxOutputTokens: oai.Int(400),
		Temperature:     oai.Float(0),
	}
	first, err := f.client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	call := first.Output[0].AsFunctionCall()
	fc := call.ToParam()
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser),
		{OfFunctionCall: &fc},
		responses.ResponseInputItemParamOfFunctionCallOutput(`{"temperature": 21}`),
	}}
	params.Input.OfInputItemList[2].OfFunctionCallOutput.CallID = oai.String(call.CallID)
	params.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: oai.Opt(responses.ToolChoiceOptionsAuto)}
	params.MaxOutputTokens = oai.Int(20)
	second, err := f.client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range second.Output {
		if it.Type != "message" {
			t.Errorf("second reply: a %s item, want messages only", it.Type)
		}
	}
	// The second prompt holds the first (tools and question) and the call
	// and its result as Qwen3's template writes them.
	if second.Usage.InputTokens <= first.Usage.InputTokens+10 {
		t.Errorf("second prompt %d tokens, first %d: the history did not grow", second.Usage.InputTokens, first.Usage.InputTokens)
	}
	if second.Usage.InputTokensDetails.CachedTokens == 0 {
		t.Errorf("second prompt: no token from the prefix cache")
	}
}

// TestResponsesFormat: text.format json_schema constrains the reply (the
// chat door's schema test, through this door's wire shape).
func TestResponsesFormat(t *testing.T) {
	f := newFixture(t, false)
	const kid = `{"type":"object","properties":{"name":{"type":"string","enum":["Lily","Tom"]},"age":{"type":"integer","minimum":1,"maximum":9}},"required":["name","age"],"additionalProperties":false}`
	var schema map[string]any
	if err := json.Unmarshal([]byte(kid), &schema); err != nil {
		t.Fatal(err)
	}
	p := f.respParams(400)
	p.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
		OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "kid", Schema: schema, Strict: oai.Bool(true)}}}
	got, err := f.client.Responses.New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "completed" {
		t.Fatalf("status %q, text %q: want completed", got.Status, got.OutputText())
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(got.OutputText()))
	if err != nil {
		t.Fatalf("text %q does not parse: %v", got.OutputText(), err)
	}
	if err := compileSchema(t, kid).Validate(inst); err != nil {
		t.Errorf("text %s does not validate: %v", got.OutputText(), err)
	}
	if got.Text.Format.Type != "json_schema" || got.Text.Format.Name != "kid" {
		t.Errorf("text.format echoed as %+v", got.Text.Format)
	}
}

// TestResponsesErrors: refusals come back as the SDK's *Error with
// OpenAI's status, type and param.
func TestResponsesErrors(t *testing.T) {
	f := newToolFixture(t)
	ctx := t.Context()
	base := f.respParams(8)
	with := func(edit func(*responses.ResponseNewParams)) responses.ResponseNewParams {
		p := base
		edit(&p)
		return p
	}
	type want struct {
		Status      int
		Type, Param string
		Has         string
	}
	for _, tc := range []struct {
		name   string
		params responses.ResponseNewParams
		opts   []option.RequestOption
		want   want
	}{
		{"store", with(func(p *responses.ResponseNewParams) { p.Store = oai.Bool(true) }), nil,
			want{400, "invalid_request_error", "store", "stores no responses"}},
		{"previous_response_id", with(func(p *responses.ResponseNewParams) { p.PreviousResponseID = oai.String("resp_1") }), nil,
			want{400, "invalid_request_error", "previous_response_id", "stores no responses"}},
		{"hosted tool", base, []option.RequestOption{option.WithJSONSet("tools", []map[string]any{{"type": "web_search"}})},
			want{400, "invalid_request_error", "tools[0].type", "web_search"}},
		{"bad schema", base, []option.RequestOption{option.WithJSONSet("tools", []map[string]any{{"type": "function", "name": "f",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "integer", "minimum": "x"}}}}})},
			want{400, "invalid_request_error", "tools[0].parameters", ""}},
		{"named tool not given", with(func(p *responses.ResponseNewParams) {
			p.Tools = respTools(t)
			p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "nope"}}
		}), nil, want{400, "invalid_request_error", "tool_choice", "nope"}},
		{"output without a call", base, []option.RequestOption{option.WithJSONSet("input", []map[string]any{
			{"role": "user", "content": "hi"}, {"type": "function_call_output", "call_id": "call_x", "output": "1"}})},
			want{400, "invalid_request_error", "input[1].call_id", "call_x"}},
		{"call arguments not JSON", base, []option.RequestOption{option.WithJSONSet("input", []map[string]any{
			{"role": "user", "content": "hi"}, {"type": "function_call", "call_id": "call_1", "name": "get_time", "arguments": "{"}})},
			want{400, "invalid_request_error", "input[1].arguments", "not JSON"}},
		{"second call's name", base, []option.RequestOption{option.WithJSONSet("input", []map[string]any{
			{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"},
			{"type": "function_call", "call_id": "call_1", "name": "get_time", "arguments": "{}"},
			{"type": "function_call", "call_id": "call_2", "name": "bad name", "arguments": "{}"}})},
			want{400, "invalid_request_error", "input[3].name", "bad name"}},
		{"bad tool name", base, []option.RequestOption{option.WithJSONSet("tools", []map[string]any{{"type": "function", "name": "a b"}})},
			want{400, "invalid_request_error", "tools[0].name", "a b"}},
		{"top_logprobs without include", with(func(p *responses.ResponseNewParams) { p.TopLogprobs = oai.Int(2) }), nil,
			want{400, "invalid_request_error", "top_logprobs", "message.output_text.logprobs"}},
		{"logprobs with tools", with(func(p *responses.ResponseNewParams) {
			p.Tools = respTools(t)
			p.Include = []responses.ResponseIncludable{responses.ResponseIncludableMessageOutputTextLogprobs}
		}), nil, want{400, "invalid_request_error", "include", "without tools"}},
		{"image part", base, []option.RequestOption{option.WithJSONSet("input", []map[string]any{
			{"role": "user", "content": []map[string]any{{"type": "input_image", "image_url": "http://x"}}}})},
			want{400, "invalid_request_error", "input[0].content[0].type", "input_image"}},
		{"item_reference", base, []option.RequestOption{option.WithJSONSet("input", []map[string]any{{"type": "item_reference", "id": "msg_1"}})},
			want{400, "invalid_request_error", "input[0].type", "stores no responses"}},
		{"zero max_output_tokens", base, []option.RequestOption{option.WithJSONSet("max_output_tokens", 0)},
			want{400, "invalid_request_error", "max_output_tokens", ""}},
		{"bad text.format", base, []option.RequestOption{option.WithJSONSet("text", map[string]any{"format": map[string]any{"type": "yaml"}})},
			want{400, "invalid_request_error", "text.format.type", "yaml"}},
		{"unknown model", with(func(p *responses.ResponseNewParams) { p.Model = "gpt-nope" }), nil,
			want{404, "invalid_request_error", "model", "gpt-nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.client.Responses.New(ctx, tc.params, tc.opts...)
			var apiErr *oai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want *openai.Error", err)
			}
			got := want{apiErr.StatusCode, apiErr.Type, apiErr.Param, tc.want.Has}
			if !strings.Contains(apiErr.Message, tc.want.Has) {
				got.Has = apiErr.Message
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestResponsesStreamError: a failure after the stream began is an
// "error" event. The generic tool format (ChatML) reads the whole reply
// as {"tool_calls": [...]}; text.format makes the model write a call whose
// arguments are not an object, which the door refuses (the model broke
// its format) after the created and in_progress events.
func TestResponsesStreamError(t *testing.T) {
	tmpl, err := chat.Fallback("chatml")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, false, func(d *frontdoor.Config, _ *Config) { d.Chat = tmpl })
	p := f.respParams(200)
	p.Tools = respTools(t)
	p.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
		OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "bad", Schema: map[string]any{
			"const": map[string]any{"tool_calls": []any{map[string]any{"name": "get_time", "arguments": 5}}}}}}}
	st := readStream(t, f.client.Responses.NewStreaming(t.Context(), p))
	if len(st.types) < 3 || st.types[0] != "response.created" || st.types[len(st.types)-1] != "error" || st.final != nil {
		t.Fatalf("events %v, final %v: want created ... error, no final", st.types, st.final)
	}
	if e := st.errs[0]; !strings.Contains(e.Message, "malformed tool call") {
		t.Errorf("error event message %q, want the malformed call named", e.Message)
	}
	// Not streamed: the same failure is a 500 in OpenAI's shape.
	_, err = f.client.Responses.New(t.Context(), p)
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 || apiErr.Type != "server_error" {
		t.Errorf("err = %v, want a 500 server_error", err)
	}
}

// TestResponsesDrain: after BeginDrain a new request gets 503 while a
// stream in flight goes on to its end.
func TestResponsesDrain(t *testing.T) {
	f := newFixture(t, true)
	ctx := t.Context()
	p := f.respParams(6)
	s := f.client.Responses.NewStreaming(ctx, p)
	if !s.Next() {
		t.Fatalf("no first event: %v", s.Err())
	}
	f.h.BeginDrain()
	_, err := f.client.Responses.New(ctx, p)
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || apiErr.Code != "service_unavailable" {
		t.Errorf("new request while draining: %v, want 503 service_unavailable", err)
	}
	fed := make(chan struct{})
	go func() { // feeds the in-flight stream's steps until its Final
		defer close(fed)
		for {
			select {
			case f.gate <- struct{}{}:
			case <-f.finals:
				return
			}
		}
	}()
	var final *responses.Response
	for s.Next() {
		if ev := s.Current(); ev.Type == "response.incomplete" || ev.Type == "response.completed" {
			r := ev.Response
			final = &r
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	<-fed
	if final == nil || final.Status != "incomplete" || final.IncompleteDetails.Reason != "max_output_tokens" || final.Usage.OutputTokens != 6 {
		t.Errorf("in-flight stream ended with %+v, want incomplete at max_output_tokens after 6 tokens", final)
	}
}

// TestResponsesDisconnect: a client that drops mid-stream cancels the
// request; it leaves the batch and its KV blocks return.
func TestResponsesDisconnect(t *testing.T) {
	f := newFixture(t, true)
	ctx, cancel := context.WithCancel(t.Context())
	s := f.client.Responses.NewStreaming(ctx, f.respParams(200))
	if !s.Next() { // response.created: submitted
		t.Fatalf("no first event: %v", s.Err())
	}
	cancel()
	s.Close()
	var fin *scheduler.Final
	for fin == nil {
		select {
		case f.gate <- struct{}{}:
		case fin = <-f.finals:
		}
	}
	if fin.Reason != scheduler.FinishCancelled {
		t.Errorf("finish %v after %d tokens, want cancelled", fin.Reason, fin.CompletionTokens)
	}
	f.sched.Drain()
	select {
	case <-f.sched.Drained():
	case <-t.Context().Done():
		t.Fatal("the scheduler never drained")
	}
	st := f.sched.Stats()
	if diff := cmp.Diff([3]int{0, 0, 0}, [3]int{st.Running, st.Waiting, st.KVBlocksUsed}); diff != "" {
		t.Errorf("running, waiting, KV blocks used after the disconnect (-want +got):\n%s", diff)
	}
}
