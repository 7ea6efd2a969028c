package server

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/chat"
)

// weatherSchema is the test tool's parameters: bounded so that a call on
// stories260K ends within the test's max_tokens.
const weatherSchema = `{"type":"object","properties":{"city":{"type":"string","maxLength":12},` +
	`"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}`

const clockSchema = `{"type":"object","properties":{"zone":{"enum":["utc","local"]}},"required":["zone"]}`

func testTools() []*inferencev1.Tool {
	return []*inferencev1.Tool{
		{Name: "get_weather", Description: "The weather in a city.", Parameters: weatherSchema},
		{Name: "get_time", Parameters: clockSchema},
	}
}

// toolClient serves stories260K with Qwen3's chat template, which renders
// tools itself and is detected as the hermes format. stories260K's
// vocabulary has none of Qwen's special tokens: the markers (<tool_call>,
// <|im_start|>) are plain text, which the hermes parser reads alike.
func toolClient(t *testing.T) inferencev1.InferenceServiceClient {
	t.Helper()
	src, err := os.ReadFile(shareddata.Path(t, "templates/Qwen-Qwen3-0.6B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.New(string(src), "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	return realClientWith(t, frontdoor.Config{Chat: tmpl})
}

type chatStreamClient = grpc.BidiStreamingClient[inferencev1.ChatRequest, inferencev1.ChatResponse]

// toolTurn is one turn's answer as the client saw it: the reply's parts
// rebuilt from the chunks, and its Final (or its TurnError).
type toolTurn struct {
	index     int32
	tokens    int
	content   string
	reasoning string
	calls     []*inferencev1.ToolCall // rebuilt from the chunks' deltas
	final     *inferencev1.Final
	err       *inferencev1.TurnError
}

// sendTurn sends one turn.
func sendTurn(t *testing.T, s chatStreamClient, turn *inferencev1.ChatTurn) {
	t.Helper()
	if err := s.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: turn}}); err != nil {
		t.Fatal(err)
	}
}

// readToolTurn reads one turn's answer, up to its Final or TurnError.
func readToolTurn(s chatStreamClient) (toolTurn, error) {
	var r toolTurn
	for {
		m, err := s.Recv()
		if err != nil {
			return r, err
		}
		r.index = m.GetTurn()
		if c := m.GetChunk(); c != nil {
			r.tokens += len(c.GetTokenIds())
			r.content += c.GetText()
			r.reasoning += c.GetReasoningText()
			for _, d := range c.GetToolCalls() {
				if d.GetId() != "" {
					if int(d.GetIndex()) != len(r.calls) {
						return r, fmt.Errorf("call delta of index %d opens call %d", d.GetIndex(), len(r.calls))
					}
					r.calls = append(r.calls, &inferencev1.ToolCall{Id: d.GetId(), Name: d.GetName()})
				}
				if int(d.GetIndex()) >= len(r.calls) {
					return r, fmt.Errorf("arguments of call %d before its id", d.GetIndex())
				}
				r.calls[d.GetIndex()].Arguments += d.GetArguments()
			}
		}
		if r.final = m.GetFinal(); r.final != nil {
			return r, nil
		}
		if r.err = m.GetError(); r.err != nil {
			return r, nil
		}
	}
}

func compileSchema(t *testing.T, s string) *jsonschema.Schema {
	t.Helper()
	return compileValidator(t, []byte(s))
}

// checkCalls checks a reply of tool calls: finish reason TOOL_CALLS, the
// calls streamed as deltas the same as the Final's, each naming one of
// the tools (want, when set) with arguments that parse and validate
// against its schema, and no content.
func checkCalls(t *testing.T, what string, r toolTurn, want string, schemas map[string]*jsonschema.Schema) {
	t.Helper()
	f := r.final
	if f.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS || len(f.GetToolCalls()) == 0 {
		t.Fatalf("%s: finish %v (%s), %d calls, content %q; want TOOL_CALLS", what, f.GetFinishReason(), f.GetErrorMessage(), len(f.GetToolCalls()), r.content)
	}
	if diff := cmp.Diff(f.GetToolCalls(), r.calls, protocmp.Transform()); diff != "" {
		t.Errorf("%s: streamed calls differ from the Final's (-final +streamed):\n%s", what, diff)
	}
	if r.content != "" {
		t.Errorf("%s: content %q beside the calls", what, r.content)
	}
	for _, c := range f.GetToolCalls() {
		if want != "" && c.GetName() != want {
			t.Fatalf("%s: call of %q, want %q", what, c.GetName(), want)
		}
		sch, ok := schemas[c.GetName()]
		if !ok {
			t.Fatalf("%s: call of unknown tool %q", what, c.GetName())
		}
		inst, err := jsonschemaParse(c.GetArguments())
		if err != nil {
			t.Fatalf("%s: %s arguments %q do not parse: %v", what, c.GetName(), c.GetArguments(), err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Fatalf("%s: %s arguments %s do not validate: %v", what, c.GetName(), c.GetArguments(), err)
		}
		if c.GetId() == "" {
			t.Errorf("%s: call without an id", what)
		}
	}
}

// TestChatToolLoop runs an agent loop on one Chat stream of stories260K
// (Qwen3's template): turn 0 with tool_choice REQUIRED is a call whose
// arguments validate; turn 1 on the same stream sends its result (a
// ROLE_TOOL message naming the call) and gets the next reply, whose prompt
// is served from the prefix cache as far as turn 0 left it: the
// conversation is not computed again.
func TestChatToolLoop(t *testing.T) {
	client := toolClient(t)
	schemas := map[string]*jsonschema.Schema{"get_weather": compileSchema(t, weatherSchema), "get_time": compileSchema(t, clockSchema)}
	s, err := client.Chat(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sendTurn(t, s, &inferencev1.ChatTurn{
		Messages:          []*inferencev1.ChatMessage{{Role: inferencev1.Role_ROLE_USER, Content: "What is the weather in Paris?"}},
		Tools:             testTools(),
		ToolChoice:        &inferencev1.ToolChoice{Choice: &inferencev1.ToolChoice_Mode{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED}},
		ParallelToolCalls: proto.Bool(false),
		Sampling:          &inferencev1.SamplingParams{Temperature: 1, Seed: proto.Uint64(7)},
		Stopping:          &inferencev1.StoppingCriteria{MaxTokens: 400},
		RequestId:         "call",
	})
	first, err := readToolTurn(s)
	if err != nil {
		t.Fatal(err)
	}
	checkCalls(t, "turn 0", first, "", schemas)
	if n := len(first.final.GetToolCalls()); n != 1 {
		t.Fatalf("turn 0: %d calls without parallel_tool_calls", n)
	}
	call := first.final.GetToolCalls()[0]
	t.Logf("turn 0: %s(%s), %d prompt tokens, %d generated", call.GetName(), call.GetArguments(),
		first.final.GetUsage().GetPromptTokens(), first.final.GetUsage().GetCompletionTokens())

	sendTurn(t, s, &inferencev1.ChatTurn{
		Messages: []*inferencev1.ChatMessage{{Role: inferencev1.Role_ROLE_TOOL, ToolCallId: call.GetId(),
			Content: `{"temperature": 21, "sky": "clear"}`}},
		Tools:     testTools(),
		Sampling:  &inferencev1.SamplingParams{Temperature: 1, Seed: proto.Uint64(7)},
		Stopping:  &inferencev1.StoppingCriteria{MaxTokens: 40},
		RequestId: "result",
	})
	next, err := readToolTurn(s)
	if err != nil {
		t.Fatal(err)
	}
	if next.err != nil || next.index != 1 {
		t.Fatalf("turn 1: %v (turn %d), want a reply to turn 1", next.err, next.index)
	}
	switch next.final.GetFinishReason() {
	case inferencev1.FinishReason_FINISH_REASON_EOS, inferencev1.FinishReason_FINISH_REASON_LENGTH, inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS:
	default:
		t.Fatalf("turn 1: finish %v (%s)", next.final.GetFinishReason(), next.final.GetErrorMessage())
	}
	if next.tokens == 0 {
		t.Fatalf("turn 1: no tokens")
	}
	u0, u1 := first.final.GetUsage(), next.final.GetUsage()
	t.Logf("turn 1: %d prompt tokens, %d from the prefix cache, %d computed; reply %q", u1.GetPromptTokens(),
		u1.GetCachedTokens(), u1.GetPromptTokens()-u1.GetCachedTokens(), next.content)
	// Turn 1's prompt starts with turn 0's (tools, user message, generation
	// prompt): every full block of it comes from the prefix cache (blocks
	// of 16 tokens), and turn 1 computes no more than what it adds (the
	// reply as the template writes it, which re-encodes the arguments with
	// spaces, and the tool result), give or take turn 0's last partial
	// block.
	const block = 16
	if got, want := u1.GetCachedTokens(), u0.GetPromptTokens()/block*block; got < want {
		t.Errorf("turn 1 reused %d prompt tokens from the prefix cache, want >= %d (turn 0's prompt, whole blocks)", got, want)
	}
	if computed, added := u1.GetPromptTokens()-u1.GetCachedTokens(), u1.GetPromptTokens()-u0.GetPromptTokens(); computed > added+block {
		t.Errorf("turn 1 computed %d of its %d prompt tokens, more than the %d it adds to turn 0's plus one block", computed, u1.GetPromptTokens(), added)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err == nil {
		t.Errorf("stream goes on after the half-close")
	}
}

// TestChatToolChoiceSeeds: with tool_choice REQUIRED (one call) or a
// named function, every reply of stories260K at temperature 1 over 20
// seeds is a call whose arguments validate against its tool's schema,
// streamed as deltas that rebuild the Final's calls; on Qwen3's template
// (hermes) and on ChatML, which renders no tools (the generic JSON shape).
func TestChatToolChoiceSeeds(t *testing.T) {
	schemas := map[string]*jsonschema.Schema{"get_weather": compileSchema(t, weatherSchema), "get_time": compileSchema(t, clockSchema)}
	for _, fx := range []struct {
		name   string
		client func(*testing.T) inferencev1.InferenceServiceClient
		seeds  uint64
	}{
		{"qwen3", toolClient, 20},
		{"chatml-generic", func(t *testing.T) inferencev1.InferenceServiceClient { return realClient(t) }, 5},
	} {
		t.Run(fx.name, func(t *testing.T) {
			client := fx.client(t)
			for _, tc := range []struct {
				name   string
				choice *inferencev1.ToolChoice
				want   string
			}{
				{"required", &inferencev1.ToolChoice{Choice: &inferencev1.ToolChoice_Mode{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED}}, ""},
				{"named", &inferencev1.ToolChoice{Choice: &inferencev1.ToolChoice_Function{Function: "get_weather"}}, "get_weather"},
			} {
				res := make([]toolTurn, fx.seeds)
				errs := make([]error, fx.seeds)
				var wg sync.WaitGroup
				slots := make(chan struct{}, 8) // the server's MaxSeqs: none waits in its queue
				for seed := range fx.seeds {
					wg.Go(func() {
						slots <- struct{}{}
						defer func() { <-slots }()
						s, err := client.Chat(context.Background())
						if err != nil {
							errs[seed] = err
							return
						}
						defer s.CloseSend()
						err = s.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: &inferencev1.ChatTurn{
							Messages:          []*inferencev1.ChatMessage{{Role: inferencev1.Role_ROLE_USER, Content: "What is the weather in Paris?"}},
							Tools:             testTools(),
							ToolChoice:        tc.choice,
							ParallelToolCalls: proto.Bool(false),
							Sampling:          &inferencev1.SamplingParams{Temperature: 1, Seed: proto.Uint64(seed)},
							Stopping:          &inferencev1.StoppingCriteria{MaxTokens: 400},
						}}})
						if err == nil {
							res[seed], err = readToolTurn(s)
						}
						errs[seed] = err
					})
				}
				wg.Wait()
				for seed, r := range res {
					what := fmt.Sprintf("%s seed %d", tc.name, seed)
					if errs[seed] != nil || r.err != nil {
						t.Fatalf("%s: %v %v", what, errs[seed], r.err)
					}
					checkCalls(t, what, r, tc.want, schemas)
					if n := len(r.final.GetToolCalls()); n != 1 {
						t.Fatalf("%s: %d calls, want 1", what, n)
					}
				}
			}
		})
	}
}

// TestChatToolRefusals: bad tools, tool choices and tool messages refuse
// the turn (a TurnError with INVALID_ARGUMENT, one ErrorInfo naming the
// field), and the stream goes on.
func TestChatToolRefusals(t *testing.T) {
	client := toolClient(t)
	s, err := client.Chat(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	user := &inferencev1.ChatMessage{Role: inferencev1.Role_ROLE_USER, Content: "Hi"}
	required := &inferencev1.ToolChoice{Choice: &inferencev1.ToolChoice_Mode{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED}}
	for i, tc := range []struct {
		name  string
		turn  *inferencev1.ChatTurn
		field string
	}{
		{"schema not an object", &inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{user},
			Tools: []*inferencev1.Tool{{Name: "f", Parameters: `[1]`}}}, "turn.tools[0].parameters"},
		{"schema unsupported", &inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{user},
			Tools: []*inferencev1.Tool{{Name: "f"}, {Name: "g", Parameters: `{"type":"object","patternProperties":{"a":{}}}`}}}, "turn.tools[1].parameters"},
		{"bad name", &inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{user},
			Tools: []*inferencev1.Tool{{Name: "a b"}}}, "turn.tools[0].name"},
		{"name twice", &inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{user},
			Tools: []*inferencev1.Tool{{Name: "f"}, {Name: "f"}}}, "turn.tools[1].name"},
		{"unknown named tool", &inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{user}, Tools: testTools(),
			ToolChoice: &inferencev1.ToolChoice{Choice: &inferencev1.ToolChoice_Function{Function: "nope"}}}, "turn.tool_choice"},
		{"required without tools", &inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{user}, ToolChoice: required}, "turn.tool_choice"},
		{"unknown mode", &inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{user}, Tools: testTools(),
			ToolChoice: &inferencev1.ToolChoice{Choice: &inferencev1.ToolChoice_Mode{Mode: 9}}}, "turn.tool_choice.mode"},
		{"required and a response format", &inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{user}, Tools: testTools(), ToolChoice: required,
			ResponseFormat: &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_JsonObject{JsonObject: true}}}, "turn.tool_choice"},
		{"tool result without its call", &inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{user,
			{Role: inferencev1.Role_ROLE_TOOL, ToolCallId: "call_x", Content: "1"}}}, "turn.messages[1].tool_call_id"},
		{"calls on a user message", &inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{{Role: inferencev1.Role_ROLE_USER, Content: "x",
			ToolCalls: []*inferencev1.ToolCall{{Id: "c", Name: "f", Arguments: "{}"}}}}}, "turn.messages[0].tool_calls"},
		{"call arguments not JSON", &inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{user, {Role: inferencev1.Role_ROLE_ASSISTANT,
			ToolCalls: []*inferencev1.ToolCall{{Id: "c", Name: "f", Arguments: "{"}}}}}, "turn.messages[1].tool_calls[0].arguments"},
		{"call without an id", &inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{user, {Role: inferencev1.Role_ROLE_ASSISTANT,
			ToolCalls: []*inferencev1.ToolCall{{Name: "f", Arguments: "{}"}}}}}, "turn.messages[1].tool_calls[0].id"},
	} {
		sendTurn(t, s, tc.turn)
		r, err := readToolTurn(s)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		te := r.err
		if te == nil || r.index != int32(i) {
			t.Fatalf("%s: %v (turn %d), want a TurnError for turn %d", tc.name, r.final, r.index, i)
		}
		if codes.Code(te.GetCode()) != codes.InvalidArgument || te.GetReason() != ReasonInvalidParameter || te.GetMetadata()["field"] != tc.field {
			t.Errorf("%s: %v %s field %q (%s), want INVALID_ARGUMENT INVALID_PARAMETER field %q", tc.name,
				codes.Code(te.GetCode()), te.GetReason(), te.GetMetadata()["field"], te.GetMessage(), tc.field)
		}
	}
	// The stream goes on: a turn with tools and no choice is answered.
	sendTurn(t, s, &inferencev1.ChatTurn{Messages: []*inferencev1.ChatMessage{user}, Tools: testTools(),
		Stopping: &inferencev1.StoppingCriteria{MaxTokens: 8}})
	if r, err := readToolTurn(s); err != nil || r.final == nil {
		t.Fatalf("after the refusals: %v %v", r.err, err)
	}
	s.CloseSend()
}

// TestTurnField: frontdoor's field names (OpenAI's, messages counted over
// the conversation) become the ChatTurn's.
func TestTurnField(t *testing.T) {
	for _, tc := range []struct {
		in   string
		keep int
		want string
	}{
		{"tools[1].function.name", 0, "turn.tools[1].name"},
		{"tools[0].function.parameters", 4, "turn.tools[0].parameters"},
		{"tools[2]", 0, "turn.tools[2]"},
		{"tools", 0, "turn.tools"},
		{"tool_choice", 3, "turn.tool_choice"},
		{"messages[5].tool_call_id", 3, "turn.messages[2].tool_call_id"},
		{"messages[3].tool_calls[1].function.arguments", 3, "turn.messages[0].tool_calls[1].arguments"},
		{"messages[1].tool_calls", 3, "conversation[1].tool_calls"},
	} {
		if got := turnField(tc.in, tc.keep); got != tc.want {
			t.Errorf("turnField(%q, %d) = %q, want %q", tc.in, tc.keep, got, tc.want)
		}
	}
}
