package frontdoor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/weft-inference/weft/anthropic"
	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/openai"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/scheduler"
	"github.com/weft-inference/weft/server"
)

// doors is one process's worth of front doors: stories260K on the CPU
// runtime, one scheduler, one Door, the gRPC server (bufconn) and the
// OpenAI handler (httptest) with the Anthropic handler mounted on it, as
// cmd/weft wires them, their metrics in one registry.
type doors struct {
	tok   interface{ TokenBytes(int32) []byte }
	reg   *prometheus.Registry
	grpc  inferencev1.InferenceServiceClient
	http  string // base URL
	model string
}

func newDoors(t *testing.T) *doors {
	t.Helper()
	m, err := runtime.Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: "f32", NumBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	kv := b.KV()
	sched, err := scheduler.New(scheduler.Config{
		BlockSize: kv.BlockSize, NumBlocks: kv.NumBlocks, MaxSeqs: 4, ContextLen: min(m.HP.ContextLen, kv.NumBlocks*kv.BlockSize),
		NewDecoder: func() scheduler.TextDecoder { return m.Tok.NewStreamDecoder() },
		IsEOG:      m.Tok.IsEOG, VocabSize: m.HP.VocabSize,
	}, runtime.NewEngine(b, m.HP.VocabSize))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { // ends at cleanup, after both doors have stopped
		defer close(runDone)
		sched.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-runDone })

	reg := prometheus.NewRegistry()
	door, err := frontdoor.New(frontdoor.Config{Tokenizer: m.Tok, Chat: chat.Default(), Limits: sched.Limits(),
		Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Scheduler: sched, Door: door, Tokenizer: m.Tok, Registry: reg,
		Info: server.ModelInfo{Name: m.Name}})
	if err != nil {
		t.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	serveDone := make(chan struct{})
	go func() { // ends at srv.Stop in cleanup
		defer close(serveDone)
		srv.Serve(lis)
	}()
	srv.SetServing(true)
	t.Cleanup(func() { srv.Stop(); <-serveDone })
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })

	h, err := openai.New(openai.Config{Scheduler: sched, Door: door, Tokenizer: m.Tok, ModelNames: []string{"m"}, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	a, err := anthropic.New(anthropic.Config{Scheduler: sched, Door: door, ModelNames: []string{"m"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range anthropic.Routes {
		h.Mount(p, a)
	}
	a.SetServing(true)
	h.SetServing(true)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return &doors{tok: m.Tok, reg: reg, grpc: inferencev1.NewInferenceServiceClient(conn), http: hs.URL, model: "m"}
}

// doorCounts are the per-request metrics, their door label dropped:
// counters' values and histograms' sample counts, by series.
func doorCounts(t *testing.T, reg *prometheus.Registry, door string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			mine := false
			for _, l := range m.GetLabel() {
				if l.GetName() == "door" {
					mine = l.GetValue() == door
					continue
				}
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			if !mine {
				continue
			}
			sort.Strings(labels)
			key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// TestSameRequestBothDoors: one greedy completion, the same through gRPC
// Generate and HTTP /v1/completions, gives the same tokens (and logprobs)
// and the same increments of the per-request metrics, door label aside.
func TestSameRequestBothDoors(t *testing.T) {
	d := newDoors(t)
	ctx := t.Context()
	const prompt, maxTokens = "Once upon a time", 24 // under one KV block: no prefix-cache difference

	// gRPC.
	before := doorCounts(t, d.reg, frontdoor.DoorGRPC)
	s, err := d.grpc.Generate(ctx, &inferencev1.GenerateRequest{
		Prompt:   &inferencev1.GenerateRequest_Text{Text: prompt},
		Sampling: &inferencev1.SamplingParams{Temperature: 0},
		Stopping: &inferencev1.StoppingCriteria{MaxTokens: maxTokens, IgnoreEos: true},
		Logprobs: &inferencev1.LogprobOptions{Enabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	var grpcText strings.Builder
	var grpcTokens []string
	var grpcLogprobs []float64
	var final *inferencev1.Final
	for {
		r, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if c := r.GetChunk(); c != nil {
			grpcText.WriteString(c.GetText())
			for _, lp := range c.GetLogprobs() {
				grpcTokens = append(grpcTokens, string(d.tok.TokenBytes(lp.GetTokenId())))
				grpcLogprobs = append(grpcLogprobs, float64(lp.GetLogprob()))
			}
		}
		if f := r.GetFinal(); f != nil {
			final = f
		}
	}
	grpcDelta := delta(before, doorCounts(t, d.reg, frontdoor.DoorGRPC))

	// HTTP.
	before = doorCounts(t, d.reg, frontdoor.DoorOpenAI)
	body, _ := json.Marshal(map[string]any{"model": d.model, "prompt": prompt, "max_tokens": maxTokens,
		"temperature": 0, "ignore_eos": true, "logprobs": 0})
	resp, err := http.Post(d.http+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
			Logprobs     struct {
				Tokens        []string  `json:"tokens"`
				TokenLogprobs []float64 `json:"token_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || len(out.Choices) != 1 {
		t.Fatalf("HTTP: status %d, %v, %+v", resp.StatusCode, err, out)
	}
	httpDelta := delta(before, doorCounts(t, d.reg, frontdoor.DoorOpenAI))

	type answer struct {
		Text     string
		Tokens   []string
		Logprobs []float64
		Finish   string
	}
	c := out.Choices[0]
	if final.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_LENGTH || len(grpcTokens) != maxTokens {
		t.Fatalf("gRPC: %d tokens, final %v; want %d and LENGTH", len(grpcTokens), final, maxTokens)
	}
	if diff := cmp.Diff(answer{grpcText.String(), grpcTokens, grpcLogprobs, "length"},
		answer{c.Text, c.Logprobs.Tokens, c.Logprobs.TokenLogprobs, c.FinishReason}); diff != "" {
		t.Errorf("HTTP's answer differs from gRPC's (-grpc +http):\n%s", diff)
	}
	want := map[string]float64{
		"weft_request_success_total{finished_reason=length}": 1,
		"weft_e2e_request_latency_seconds{}":                 1,
		"weft_request_queue_time_seconds{}":                  1,
		"weft_time_to_first_token_seconds{}":                 1,
		"weft_time_per_output_token_seconds{}":               1,
	}
	if diff := cmp.Diff(want, grpcDelta); diff != "" {
		t.Errorf("gRPC's metric increments (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(grpcDelta, httpDelta); diff != "" {
		t.Errorf("metric increments, door label aside (-grpc +http):\n%s", diff)
	}
}

// delta is after - before, the series that did not move left out.
func delta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// chatAnswer is a door's answer to a chat request.
type chatAnswer struct {
	Text string
	// Tokens are the generated tokens' bytes, nil from a door that does
	// not show them (Anthropic's).
	Tokens           []string
	PromptTokens     int
	CompletionTokens int
	Finish           string // "length" or "stop"
}

// chatConv is the conversation every door is sent.
type chatConv struct {
	system, user string
	maxTokens    int
}

// postJSON posts v to the HTTP doors and decodes the answer into out.
func (d *doors) postJSON(t *testing.T, path string, v, out any) {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(d.http+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: status %d: %s", path, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// chatDoors are the doors that take a chat conversation, each asked for a
// greedy reply. A new door adds its entry.
var chatDoors = []struct {
	door string // its metrics' door label
	ask  func(t *testing.T, d *doors, c chatConv) chatAnswer
}{
	{frontdoor.DoorGRPC, func(t *testing.T, d *doors, c chatConv) chatAnswer {
		s, err := d.grpc.Chat(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		err = s.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: &inferencev1.ChatTurn{
			Messages: []*inferencev1.ChatMessage{{Role: inferencev1.Role_ROLE_SYSTEM, Content: c.system},
				{Role: inferencev1.Role_ROLE_USER, Content: c.user}},
			Sampling: &inferencev1.SamplingParams{Temperature: 0},
			Stopping: &inferencev1.StoppingCriteria{MaxTokens: int32(c.maxTokens)},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		var a chatAnswer
		for {
			r, err := s.Recv()
			if err != nil {
				t.Fatalf("gRPC Chat: %v", err)
			}
			if ch := r.GetChunk(); ch != nil {
				a.Text += ch.GetText()
				for _, id := range ch.GetTokenIds() {
					a.Tokens = append(a.Tokens, string(d.tok.TokenBytes(id)))
				}
			}
			if f := r.GetFinal(); f != nil {
				a.PromptTokens, a.CompletionTokens = int(f.GetUsage().GetPromptTokens()), int(f.GetUsage().GetCompletionTokens())
				a.Finish = map[inferencev1.FinishReason]string{inferencev1.FinishReason_FINISH_REASON_LENGTH: "length",
					inferencev1.FinishReason_FINISH_REASON_EOS: "stop", inferencev1.FinishReason_FINISH_REASON_STOP_SEQUENCE: "stop"}[f.GetFinishReason()]
				break
			}
		}
		if err := s.CloseSend(); err != nil {
			t.Fatal(err)
		}
		return a
	}},
	{frontdoor.DoorOpenAI, func(t *testing.T, d *doors, c chatConv) chatAnswer {
		var out struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
				Logprobs     struct {
					Content []struct {
						Bytes []byte `json:"bytes"`
					} `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
			Usage struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		d.postJSON(t, "/v1/chat/completions", map[string]any{"model": d.model, "temperature": 0, "max_tokens": c.maxTokens, "logprobs": true,
			"messages": []map[string]string{{"role": "system", "content": c.system}, {"role": "user", "content": c.user}}}, &out)
		if len(out.Choices) != 1 {
			t.Fatalf("chat completions: %d choices", len(out.Choices))
		}
		ch := out.Choices[0]
		a := chatAnswer{Text: ch.Message.Content, PromptTokens: out.Usage.PromptTokens, CompletionTokens: out.Usage.CompletionTokens,
			Finish: ch.FinishReason, Tokens: []string{}}
		for _, lp := range ch.Logprobs.Content {
			a.Tokens = append(a.Tokens, string(lp.Bytes))
		}
		return a
	}},
	{frontdoor.DoorResponses, func(t *testing.T, d *doors, c chatConv) chatAnswer {
		var out struct {
			Status string `json:"status"`
			Output []struct {
				Type    string `json:"type"`
				Content []struct {
					Text     string `json:"text"`
					Logprobs []struct {
						Bytes []byte `json:"bytes"`
					} `json:"logprobs"`
				} `json:"content"`
			} `json:"output"`
			Usage struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		}
		d.postJSON(t, "/v1/responses", map[string]any{"model": d.model, "temperature": 0, "max_output_tokens": c.maxTokens,
			"include": []string{"message.output_text.logprobs"}, "instructions": c.system,
			"input": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "input_text", "text": c.user}}}}}, &out)
		a := chatAnswer{PromptTokens: out.Usage.InputTokens, CompletionTokens: out.Usage.OutputTokens, Tokens: []string{},
			Finish: map[string]string{"incomplete": "length", "completed": "stop"}[out.Status]}
		for _, it := range out.Output {
			if it.Type != "message" {
				t.Fatalf("responses: output item %q, want one message", it.Type)
			}
			for _, ct := range it.Content {
				a.Text += ct.Text
				for _, lp := range ct.Logprobs {
					a.Tokens = append(a.Tokens, string(lp.Bytes))
				}
			}
		}
		return a
	}},
	{frontdoor.DoorAnthropic, func(t *testing.T, d *doors, c chatConv) chatAnswer {
		var out struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			StopReason string `json:"stop_reason"`
			Usage      struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		}
		d.postJSON(t, "/v1/messages", map[string]any{"model": d.model, "temperature": 0, "max_tokens": c.maxTokens, "system": c.system,
			"messages": []map[string]string{{"role": "user", "content": c.user}}}, &out)
		if len(out.Content) != 1 || out.Content[0].Type != "text" {
			t.Fatalf("messages: content %+v, want one text block", out.Content)
		}
		return chatAnswer{Text: out.Content[0].Text, PromptTokens: out.Usage.InputTokens, CompletionTokens: out.Usage.OutputTokens,
			Finish: map[string]string{"max_tokens": "length", "end_turn": "stop", "stop_sequence": "stop"}[out.StopReason]}
	}},
}

// TestSameChatEveryDoor: one greedy chat conversation through every chat
// door (gRPC Chat, /v1/chat/completions, /v1/responses, /v1/messages) gives the same
// tokens (their bytes, where the door shows them), text, usage and finish,
// and the same increments of the per-request metrics, door label aside.
func TestSameChatEveryDoor(t *testing.T) {
	d := newDoors(t)
	c := chatConv{system: "You tell stories.", user: "Tell me about a cat.", maxTokens: 24}
	var first chatAnswer
	var firstDelta map[string]float64
	for i, cd := range chatDoors {
		before := doorCounts(t, d.reg, cd.door)
		got := cd.ask(t, d, c)
		inc := delta(before, doorCounts(t, d.reg, cd.door))
		if i == 0 {
			first, firstDelta = got, inc
			if got.Text == "" || len(got.Tokens) != got.CompletionTokens || got.CompletionTokens == 0 || got.Finish == "" {
				t.Fatalf("%s: %+v: want text, one token per completion token, a finish", cd.door, got)
			}
			continue
		}
		want := first
		if got.Tokens == nil {
			want.Tokens = nil
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s's answer differs from %s's (-%s +%s):\n%s", cd.door, chatDoors[0].door, chatDoors[0].door, cd.door, diff)
		}
		if diff := cmp.Diff(firstDelta, inc); diff != "" {
			t.Errorf("metric increments, door label aside (-%s +%s):\n%s", chatDoors[0].door, cd.door, diff)
		}
	}
}

// TestTokenizeBothDoors: gRPC Tokenize and HTTP /tokenize give the same
// tokens (one tokenizing, the Door's), and Detokenize and /detokenize the
// same text.
func TestTokenizeBothDoors(t *testing.T) {
	d := newDoors(t)
	const text = "Once upon a time, a cat."
	g, err := d.grpc.Tokenize(t.Context(), &inferencev1.TokenizeRequest{Text: text, AddSpecialTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Tokens []int32 `json:"tokens"`
		Count  int     `json:"count"`
	}
	d.postJSON(t, "/tokenize", map[string]any{"prompt": text}, &h)
	if diff := cmp.Diff(g.GetTokenIds(), h.Tokens); diff != "" || h.Count != len(h.Tokens) {
		t.Errorf("tokens (-grpc +http), count %d:\n%s", h.Count, diff)
	}
	gd, err := d.grpc.Detokenize(t.Context(), &inferencev1.DetokenizeRequest{TokenIds: g.GetTokenIds()[1:]})
	if err != nil {
		t.Fatal(err)
	}
	var hd struct {
		Prompt string `json:"prompt"`
	}
	d.postJSON(t, "/detokenize", map[string]any{"tokens": g.GetTokenIds()[1:]}, &hd)
	if gd.GetText() != text || hd.Prompt != text {
		t.Errorf("detokenized: gRPC %q, HTTP %q, want %q", gd.GetText(), hd.Prompt, text)
	}
}
