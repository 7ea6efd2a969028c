package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/bench/benchtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func dial(t *testing.T, s *benchtest.Server) Client {
	t.Helper()
	conn, err := grpc.NewClient(benchtest.Serve(t, s), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return inferencev1.NewInferenceServiceClient(conn)
}

func seedConfig() Config {
	return Config{
		Concurrency: 3, Requests: 12, Warmup: 2, Seed: 5,
		PromptLen: Fixed{N: 16}, OutputLen: Cycle{Lens: []int{6, 50, 300}}, IgnoreEOS: true,
	}
}

func TestRunClosedLoopOutputLens(t *testing.T) {
	fake := &benchtest.Server{ChunkSize: 4}
	res, err := Run(t.Context(), dial(t, fake), seedConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatalf("Err() = %v", err)
	}
	if res.Requests != 12 || res.Completed != 12 || res.Failed != 0 {
		t.Errorf("requests/completed/failed = %d/%d/%d, want 12/12/0", res.Requests, res.Completed, res.Failed)
	}
	if res.TotalOutputTokens != 4*(6+50+300) {
		t.Errorf("output tokens %d, want %d", res.TotalOutputTokens, 4*(6+50+300))
	}
	if res.DurationS <= 0 || res.OutputTokensPerSecond <= 0 {
		t.Errorf("duration %v s, %v tok/s: want both > 0", res.DurationS, res.OutputTokensPerSecond)
	}
	if diff := cmp.Diff([]string{"6", "50", "300"}, sortedLenKeys(res.ByOutputLen)); diff != "" {
		t.Errorf("by_output_len keys (-want +got):\n%s", diff)
	}
	for k, l := range res.ByOutputLen {
		if l.Requests != 4 {
			t.Errorf("by_output_len[%s]: %d requests, want 4", k, l.Requests)
		}
	}
	// ITL is counted once per chunk: a 6-token request in chunks of 4 has
	// chunks of 4 and 2, so one gap; a 300-token one has 75 chunks.
	if want := 4 * (1 + 12 + 74); res.ITL.N != want {
		t.Errorf("ITL count %d, want %d (one per chunk gap)", res.ITL.N, want)
	}
	if res.Queue.N != 12 || res.Queue.P50 != 1 {
		t.Errorf("queue summary %+v, want 12 values of 1 ms (the server's timings)", res.Queue)
	}

	reqs := fake.Requests()
	if len(reqs) != 14 {
		t.Fatalf("server saw %d requests, want 12 + 2 warm-up", len(reqs))
	}
	var ids []string
	for _, r := range reqs {
		ids = append(ids, r.GetRequestId())
		p := r.GetTokenIds().GetIds()
		if len(p) != 16 || p[0] != 1 {
			t.Errorf("%s: prompt %v, want 16 ids starting with BOS 1", r.GetRequestId(), p)
		}
		for _, id := range p[1:] {
			if id < 11 {
				t.Errorf("%s: prompt has id %d, which is not plain text", r.GetRequestId(), id)
			}
		}
		if !r.GetStopping().GetIgnoreEos() {
			t.Errorf("%s: ignore_eos not set", r.GetRequestId())
		}
	}
	slices.Sort(ids)
	if ids[0] != "bench--1" || ids[1] != "bench--2" {
		t.Errorf("warm-up request ids %v, want bench--1 and bench--2", ids[:2])
	}
}

func TestRunRepeatable(t *testing.T) {
	prompts := func() map[string][]int32 {
		fake := &benchtest.Server{}
		cfg := seedConfig()
		cfg.PromptLen = Uniform{Lo: 4, Hi: 30}
		cfg.OutputLen = Uniform{Lo: 1, Hi: 8}
		if _, err := Run(t.Context(), dial(t, fake), cfg); err != nil {
			t.Fatal(err)
		}
		m := map[string][]int32{}
		for _, r := range fake.Requests() {
			m[r.GetRequestId()] = append(r.GetTokenIds().GetIds(), r.GetStopping().GetMaxTokens())
		}
		return m
	}
	if diff := cmp.Diff(prompts(), prompts()); diff != "" {
		t.Errorf("same seed, different requests (-first +second):\n%s", diff)
	}
}

func TestRunFailsOnRPCError(t *testing.T) {
	fake := &benchtest.Server{Fail: map[string]bool{"bench-5": true}}
	res, err := Run(t.Context(), dial(t, fake), seedConfig())
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 1 || res.Completed != 11 {
		t.Errorf("failed/completed = %d/%d, want 1/11", res.Failed, res.Completed)
	}
	err = res.Err()
	if err == nil || !strings.Contains(err.Error(), "injected failure for bench-5") {
		t.Errorf("Err() = %v, want the injected failure", err)
	}
	if l := res.ByOutputLen["300"]; l.Requests != 3 { // bench-5 asked for 300
		t.Errorf("by_output_len[300] counts %d successful requests, want 3", l.Requests)
	}
}

func TestRunFailsOnWrongLength(t *testing.T) {
	fake := &benchtest.Server{ShortBy: 1}
	cfg := seedConfig()
	cfg.Warmup = 0
	res, err := Run(t.Context(), dial(t, fake), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 12 || res.Err() == nil {
		t.Errorf("failed = %d, Err() = %v; want every request failed (ignore_eos length mismatch)", res.Failed, res.Err())
	}
}

// TestRunResponseFormat: the format goes out on every request without
// ignore_eos, and outputs shorter than max_tokens count as completed, by
// their finish reason.
func TestRunResponseFormat(t *testing.T) {
	fake := &benchtest.Server{ShortBy: 4}
	cfg := seedConfig()
	cfg.IgnoreEOS = false
	cfg.ResponseFormat = &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_Regex{Regex: "[a-z]+"}}
	res, err := Run(t.Context(), dial(t, fake), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatalf("Err() = %v, want every request completed", err)
	}
	if diff := cmp.Diff(map[string]int{"eos": 12}, res.FinishReasons); diff != "" {
		t.Errorf("finish reasons (-want +got):\n%s", diff)
	}
	if want := 4 * (2 + 46 + 296); res.TotalOutputTokens != want {
		t.Errorf("total output tokens %d, want %d (max_tokens less ShortBy, from the usage)", res.TotalOutputTokens, want)
	}
	if want := `{"regex":"[a-z]+"}`; strings.ReplaceAll(res.ResponseFormat, " ", "") != want {
		t.Errorf("ResponseFormat = %s, want %s", res.ResponseFormat, want)
	}
	reqs := fake.Requests()
	if len(reqs) != 14 {
		t.Fatalf("%d requests reached the server, want 14 (2 warm-up + 12)", len(reqs))
	}
	for _, r := range reqs {
		if r.GetResponseFormat().GetRegex() != "[a-z]+" || r.GetStopping().GetIgnoreEos() {
			t.Errorf("request %s: response_format %v, ignore_eos %v; want the regex and false",
				r.GetRequestId(), r.GetResponseFormat(), r.GetStopping().GetIgnoreEos())
		}
	}
}

// TestRunChatTurn: with a ChatTurn each request is one turn of its own
// Chat stream, the turn's tools and choice kept, the prompt its user
// message; forced calls end early and count as completed.
func TestRunChatTurn(t *testing.T) {
	fake := &benchtest.Server{ShortBy: 4}
	cfg := seedConfig()
	cfg.IgnoreEOS = false
	cfg.ChatTurn = &inferencev1.ChatTurn{
		Tools:      []*inferencev1.Tool{{Name: "f", Parameters: `{"type":"object"}`}},
		ToolChoice: &inferencev1.ToolChoice{Choice: &inferencev1.ToolChoice_Mode{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED}},
	}
	res, err := Run(t.Context(), dial(t, fake), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatalf("Err() = %v, want every request completed", err)
	}
	if diff := cmp.Diff(map[string]int{"tool_calls": 12}, res.FinishReasons); diff != "" {
		t.Errorf("finish reasons (-want +got):\n%s", diff)
	}
	if want := 4 * (2 + 46 + 296); res.TotalOutputTokens != want {
		t.Errorf("total output tokens %d, want %d", res.TotalOutputTokens, want)
	}
	turns := fake.Turns()
	if len(turns) != 14 || len(fake.Requests()) != 0 {
		t.Fatalf("%d turns and %d Generate requests reached the server, want 14 turns (2 warm-up + 12)", len(turns), len(fake.Requests()))
	}
	for _, tr := range turns {
		if len(tr.GetTools()) != 1 || len(tr.GetMessages()) != 1 || tr.GetMessages()[0].GetRole() != inferencev1.Role_ROLE_USER ||
			tr.GetMessages()[0].GetContent() == "" || tr.GetStopping().GetIgnoreEos() {
			t.Errorf("turn %s: %v", tr.GetRequestId(), tr)
		}
	}
	if len(cfg.ChatTurn.GetMessages()) != 0 {
		t.Errorf("the configured turn was changed: %v", cfg.ChatTurn)
	}
}

func TestRunWarmupFailure(t *testing.T) {
	fake := &benchtest.Server{Fail: map[string]bool{"bench--1": true}}
	if _, err := Run(t.Context(), dial(t, fake), seedConfig()); err == nil {
		t.Error("Run succeeded although a warm-up request failed")
	}
}

func TestRunServerDown(t *testing.T) {
	conn, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := Run(ctx, inferencev1.NewInferenceServiceClient(conn), seedConfig()); err == nil {
		t.Error("Run succeeded against no server")
	}
}

func TestRunOpenLoop(t *testing.T) {
	for _, conc := range []int{0, 2} {
		fake := &benchtest.Server{}
		cfg := Config{Rate: 400, Burstiness: 0.5, Concurrency: conc, Requests: 20, Seed: 1,
			PromptLen: Fixed{N: 8}, OutputLen: Fixed{N: 4}, IgnoreEOS: true, SLO: SLO{TTFT: time.Hour}}
		res, err := Run(t.Context(), dial(t, fake), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Completed != 20 || res.Err() != nil {
			t.Errorf("concurrency %d: completed %d, Err() %v; want 20, nil", conc, res.Completed, res.Err())
		}
		if res.Goodput == nil || res.Goodput.Good != 20 {
			t.Errorf("concurrency %d: goodput %+v, want 20 good under a 1h TTFT SLO", conc, res.Goodput)
		}
		if !strings.HasPrefix(res.Mode, "open loop, 400 req/s") {
			t.Errorf("mode %q", res.Mode)
		}
	}
}

func TestRunDuration(t *testing.T) {
	fake := &benchtest.Server{ChunkDelay: time.Millisecond}
	cfg := Config{Concurrency: 2, Duration: 100 * time.Millisecond, Seed: 1,
		PromptLen: Fixed{N: 8}, OutputLen: Fixed{N: 3}, IgnoreEOS: true}
	res, err := Run(t.Context(), dial(t, fake), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests < 2 || res.Failed != 0 || res.DurationS < 0.1 {
		t.Errorf("requests %d, failed %d, duration %v s; want >= 2, 0, >= 0.1", res.Requests, res.Failed, res.DurationS)
	}
}

func TestPromptVocab(t *testing.T) {
	c := dial(t, &benchtest.Server{})
	info, err := c.GetModelInfo(t.Context(), &inferencev1.GetModelInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := PromptVocab(t.Context(), c, info, 1)
	if err != nil {
		t.Fatal(err)
	}
	var want []int32
	for id := int32(11); id < benchtest.VocabSize; id++ {
		want = append(want, id)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PromptVocab (-want +got):\n%s", diff)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := seedConfig()
	for name, mut := range map[string]func(*Config){
		"both requests and duration": func(c *Config) { c.Duration = time.Second },
		"neither":                    func(c *Config) { c.Requests = 0 },
		"no concurrency nor rate":    func(c *Config) { c.Concurrency = 0 },
		"negative rate":              func(c *Config) { c.Rate = -1 },
		"no lengths":                 func(c *Config) { c.OutputLen = nil },
		"response format with ignore_eos": func(c *Config) {
			c.ResponseFormat = &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_JsonObject{JsonObject: true}}
		},
	} {
		c := ok
		mut(&c)
		if err := c.validate(); err == nil {
			t.Errorf("%s: validate accepted", name)
		}
	}
	if err := ok.validate(); err != nil || ok.Burstiness != 1 {
		t.Errorf("validate() = %v, burstiness %v; want nil, 1", err, ok.Burstiness)
	}
}
