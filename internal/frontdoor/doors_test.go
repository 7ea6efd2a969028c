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
// OpenAI handler (httptest), their metrics in one registry.
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
