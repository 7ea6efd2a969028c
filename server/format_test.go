package server

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
)

// formatMaxTokens is the budget of one constrained generation.
const formatMaxTokens = 400

type formatCase struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

func compileValidator(t *testing.T, schema []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func jsonschemaParse(text string) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader([]byte(text)))
}

func constrainedReq(prompt string, seed uint64, f *inferencev1.ResponseFormat) *inferencev1.GenerateRequest {
	return &inferencev1.GenerateRequest{
		Prompt:         &inferencev1.GenerateRequest_Text{Text: prompt},
		Sampling:       &inferencev1.SamplingParams{Temperature: 1, Seed: proto.Uint64(seed)},
		Stopping:       &inferencev1.StoppingCriteria{MaxTokens: formatMaxTokens},
		Logprobs:       &inferencev1.LogprobOptions{TopN: 3},
		ResponseFormat: f,
	}
}

// TestResponseFormatStories generates with every test schema on
// stories260K (the real model, temperature 1, three seeds, the requests of
// a schema batched together): each output that ended on EOS parses and
// validates against its schema, each one cut by max_tokens says LENGTH,
// and top logprobs only name tokens the constraint allowed.
func TestResponseFormatStories(t *testing.T) {
	data, err := os.ReadFile("../runtime/constrain/testdata/schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []formatCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	client := realClient(t)
	ctx := context.Background()
	ended, cut := 0, 0
	for _, fc := range cases {
		sch := compileValidator(t, fc.Schema)
		f := &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_JsonSchema{
			JsonSchema: &inferencev1.JsonSchema{Schema: string(fc.Schema), Strict: true, Name: fc.Name}}}
		var wg sync.WaitGroup
		res := make([]genResult, 3)
		for seed := range res {
			wg.Go(func() {
				s, err := client.Generate(ctx, constrainedReq("Once upon a time", uint64(seed), f))
				if err != nil {
					res[seed] = genResult{err: err}
					return
				}
				res[seed] = collect(s)
			})
		}
		wg.Wait()
		for seed, r := range res {
			if r.err != nil {
				t.Fatalf("%s seed %d: %v", fc.Name, seed, r.err)
			}
			switch r.final.GetFinishReason() {
			case inferencev1.FinishReason_FINISH_REASON_EOS:
				ended++
				inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(r.text)))
				if err != nil {
					t.Fatalf("%s seed %d: %q does not parse: %v", fc.Name, seed, r.text, err)
				}
				if err := sch.Validate(inst); err != nil {
					t.Fatalf("%s seed %d: %q: %v", fc.Name, seed, r.text, err)
				}
			case inferencev1.FinishReason_FINISH_REASON_LENGTH:
				cut++
				t.Logf("cut at max_tokens: %s seed %d: %.60q...", fc.Name, seed, r.text)
				if len(r.tokens) != formatMaxTokens {
					t.Fatalf("%s seed %d: LENGTH after %d tokens", fc.Name, seed, len(r.tokens))
				}
			default:
				t.Fatalf("%s seed %d: finish reason %v", fc.Name, seed, r.final.GetFinishReason())
			}
		}
	}
	t.Logf("%d outputs ended on EOS and validated, %d cut at max_tokens=%d", ended, cut, formatMaxTokens)
	// The model's own text may run on inside an open string or array past
	// the budget; most outputs end.
	if ended < 3*len(cases)*85/100 {
		t.Errorf("only %d of %d outputs ended", ended, 3*len(cases))
	}
}

// TestResponseFormatKinds covers regex, choice, grammar and json_object
// through Generate and a Chat turn.
func TestResponseFormatKinds(t *testing.T) {
	client := realClient(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		f     *inferencev1.ResponseFormat
		check func(string) bool
	}{
		{"regex", &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_Regex{Regex: `(Lily|Tom) (is|was) [a-z]{1,8}\.`}},
			regexp.MustCompile(`^(Lily|Tom) (is|was) [a-z]{1,8}\.$`).MatchString},
		{"choice", &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_Choice{Choice: &inferencev1.Choice{Values: []string{"happy", "sad", "angry"}}}},
			func(s string) bool { return s == "happy" || s == "sad" || s == "angry" }},
		{"grammar", &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_Grammar{Grammar: "root ::= num (\"+\" num)*\nnum ::= [1-9] [0-9]?"}},
			regexp.MustCompile(`^[1-9][0-9]?(\+[1-9][0-9]?)*$`).MatchString},
		{"json_object", &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_JsonObject{JsonObject: true}},
			func(s string) bool { var m map[string]any; return json.Unmarshal([]byte(s), &m) == nil }},
	} {
		for seed := range uint64(3) {
			s, err := client.Generate(ctx, constrainedReq("Once upon a time", seed, tc.f))
			if err != nil {
				t.Fatal(err)
			}
			r := collect(s)
			if r.err != nil {
				t.Fatalf("%s: %v", tc.name, r.err)
			}
			if r.final.GetFinishReason() == inferencev1.FinishReason_FINISH_REASON_EOS && !tc.check(r.text) {
				t.Errorf("%s seed %d: %q", tc.name, seed, r.text)
			}
		}
	}

	// A chat turn carries its own format.
	chat, err := client.Chat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = chat.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: &inferencev1.ChatTurn{
		Messages:       []*inferencev1.ChatMessage{{Role: inferencev1.Role_ROLE_USER, Content: "Pick a color."}},
		Sampling:       &inferencev1.SamplingParams{Temperature: 1, Seed: proto.Uint64(1)},
		Stopping:       &inferencev1.StoppingCriteria{MaxTokens: 20},
		ResponseFormat: &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_Choice{Choice: &inferencev1.Choice{Values: []string{"red", "blue"}}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for {
		m, err := chat.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if c := m.GetChunk(); c != nil {
			text += c.GetText()
		}
		if f := m.GetFinal(); f != nil {
			if f.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_EOS || (text != "red" && text != "blue") {
				t.Errorf("chat: %q, %v", text, f.GetFinishReason())
			}
			break
		}
	}
	chat.CloseSend()
}

// TestResponseFormatTruncated: a format that cannot finish within
// max_tokens ends with LENGTH, the output a prefix of a valid one.
func TestResponseFormatTruncated(t *testing.T) {
	client := realClient(t)
	f := &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_JsonSchema{JsonSchema: &inferencev1.JsonSchema{
		Schema: `{"type":"array","items":{"type":"integer"},"minItems":50}`}}}
	req := constrainedReq("Once upon a time", 1, f)
	req.Stopping.MaxTokens = 5
	s, err := client.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	r := collect(s)
	if r.err != nil || r.final.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_LENGTH || len(r.tokens) != 5 {
		t.Fatalf("%v %v %d tokens", r.err, r.final.GetFinishReason(), len(r.tokens))
	}
	if !regexp.MustCompile(`^\[(-?[0-9]*,?)*$`).MatchString(r.text) {
		t.Errorf("%q is not a prefix of an integer array", r.text)
	}
}

// TestResponseFormatInvalid: formats that cannot be compiled are refused
// with INVALID_ARGUMENT and reason INVALID_RESPONSE_FORMAT naming the
// problem.
func TestResponseFormatInvalid(t *testing.T) {
	client := realClient(t)
	for _, tc := range []struct {
		f    *inferencev1.ResponseFormat
		want string
	}{
		{&inferencev1.ResponseFormat{}, "no format set"},
		{&inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_JsonSchema{JsonSchema: &inferencev1.JsonSchema{}}}, "no format set"},
		{&inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_JsonSchema{JsonSchema: &inferencev1.JsonSchema{Schema: `{"type":"string","contentMediaType":"x"}`}}}, "contentMediaType"},
		{&inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_JsonSchema{JsonSchema: &inferencev1.JsonSchema{Schema: `{`}}}, "not JSON"},
		{&inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_Regex{Regex: `(`}}, "missing closing )"},
		{&inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_Grammar{Grammar: `start ::= "a"`}}, "root"},
		{&inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_Choice{Choice: &inferencev1.Choice{}}}, "no values"},
	} {
		s, err := client.Generate(context.Background(), constrainedReq("Hi", 1, tc.f))
		if err == nil {
			err = collect(s).err
		}
		st := status.Convert(err)
		var reason string
		for _, d := range st.Details() {
			if ei, ok := d.(*errdetails.ErrorInfo); ok {
				reason = ei.GetReason()
			}
		}
		if st.Code() != codes.InvalidArgument || reason != ReasonInvalidResponseFormat || !regexp.MustCompile(regexp.QuoteMeta(tc.want)).MatchString(st.Message()) {
			t.Errorf("%v: got %v %s %q, want INVALID_ARGUMENT %s naming %q", tc.f, st.Code(), reason, st.Message(), ReasonInvalidResponseFormat, tc.want)
		}
	}
}

// TestReadmeFormats: the README's grpcurl examples of response_format are
// valid GenerateRequests in grpcurl's JSON, and their formats compile.
func TestReadmeFormats(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(data), "### Structured output")
	if !ok {
		t.Fatal("README has no Structured output section")
	}
	sec, _, _ = strings.Cut(sec, "\n### ")
	bodies := regexp.MustCompile(`(?s)-d '(\{.*?\})'`).FindAllStringSubmatch(sec, -1)
	if len(bodies) < 2 {
		t.Fatalf("found %d request bodies", len(bodies))
	}
	client := realClient(t)
	for _, b := range bodies {
		var req inferencev1.GenerateRequest
		if err := protojson.Unmarshal([]byte(b[1]), &req); err != nil {
			t.Fatalf("%s: %v", b[1], err)
		}
		if req.GetResponseFormat() == nil {
			t.Fatalf("%s: no response_format", b[1])
		}
		s, err := client.Generate(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		if r := collect(s); r.err != nil {
			t.Fatalf("%s: %v", b[1], r.err)
		}
	}
}
