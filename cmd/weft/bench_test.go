package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weft-inference/weft/bench/benchtest"
)

func benchJSON(t *testing.T, fake *benchtest.Server, extra ...string) (map[string]any, error) {
	t.Helper()
	addr := benchtest.Serve(t, fake)
	args := append([]string{"--addr", addr, "--format", "json", "--requests", "9", "--concurrency", "3",
		"--warmup", "1", "--prompt-len", "8", "--output-lens", "6,50,300", "--seed", "3"}, extra...)
	var out, errb bytes.Buffer
	err := runBench(t.Context(), args, &out, &errb)
	var m map[string]any
	if jerr := json.Unmarshal(out.Bytes(), &m); jerr != nil {
		t.Fatalf("output is not one JSON object: %v\n%s\nstderr: %s", jerr, out.String(), errb.String())
	}
	return m, err
}

func TestBenchJSON(t *testing.T) {
	m, err := benchJSON(t, &benchtest.Server{ChunkSize: 2}, "--slo-ttft", "1h", "--slo-tpot", "1h")
	if err != nil {
		t.Fatalf("runBench: %v", err)
	}
	for _, k := range []string{"requests", "failed", "duration_s", "request_throughput", "output_tokens_per_second", "goodput"} {
		if _, ok := m[k]; !ok {
			t.Errorf("missing %q", k)
		}
	}
	if m["requests"] != 9.0 || m["failed"] != 0.0 {
		t.Errorf("requests %v failed %v, want 9 and 0", m["requests"], m["failed"])
	}
	for _, k := range []string{"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"} {
		s, ok := m[k].(map[string]any)
		if !ok {
			t.Errorf("%s is %T, want an object", k, m[k])
			continue
		}
		for _, f := range []string{"mean", "p50", "p90", "p99"} {
			if _, ok := s[f].(float64); !ok {
				t.Errorf("%s.%s missing", k, f)
			}
		}
	}
	by, _ := m["by_output_len"].(map[string]any)
	var keys []string
	for k, v := range by {
		keys = append(keys, k)
		if _, ok := v.(map[string]any)["e2e_ms"].(map[string]any)["p50"]; !ok {
			t.Errorf("by_output_len[%s] has no e2e_ms.p50", k)
		}
	}
	if diff := cmp.Diff([]string{"300", "50", "6"}, sorted(keys)); diff != "" {
		t.Errorf("by_output_len keys (-want +got):\n%s", diff)
	}
	if g := m["goodput"].(map[string]any); g["good_requests"] != 9.0 {
		t.Errorf("goodput %v, want 9 good requests", g)
	}
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

func TestBenchFailsOnRPCError(t *testing.T) {
	m, err := benchJSON(t, &benchtest.Server{Fail: map[string]bool{"bench-4": true}})
	if err == nil {
		t.Fatal("runBench returned nil although a request failed")
	}
	if !strings.Contains(err.Error(), "1 of 9 requests failed") {
		t.Errorf("error %q does not say how many failed", err)
	}
	if m["failed"] != 1.0 {
		t.Errorf("failed = %v, want 1", m["failed"])
	}
}

func TestBenchTableAndPlot(t *testing.T) {
	addr := benchtest.Serve(t, &benchtest.Server{ChunkSize: 3})
	plot := filepath.Join(t.TempDir(), "bench.png")
	var out, errb bytes.Buffer
	err := runBench(t.Context(), []string{"--addr", addr, "--requests", "6", "--concurrency", "2",
		"--workload", "seed", "--plot", plot}, &out, &errb)
	if err != nil {
		t.Fatalf("runBench: %v\nstderr: %s", err, errb.String())
	}
	for _, want := range []string{"closed loop, concurrency 2", "6 completed, 0 failed", "output_len=300", "ttft", "e2e"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("plot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 200 {
		t.Errorf("plot is %v, too small", b)
	}
}

func TestBenchCompare(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, fake *benchtest.Server) string {
		m, err := benchJSON(t, fake)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(m)
		p := filepath.Join(dir, name+".json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("fast", &benchtest.Server{ChunkSize: 5})
	b := write("slow", &benchtest.Server{ChunkSize: 1})
	var out, errb bytes.Buffer
	if err := runBench(t.Context(), []string{"--compare", a + "," + b, "--format", "json"}, &out, &errb); err != nil {
		t.Fatalf("compare: %v", err)
	}
	var c map[string]any
	if err := json.Unmarshal(out.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"output_throughput_ratio", "ttft_p99_ratio", "shortest_e2e_p50_ratio"} {
		if v, ok := c[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive ratio", k, c[k])
		}
	}
	if c["a"] != "fast" || c["b"] != "slow" || c["shortest_output_len"] != 6.0 {
		t.Errorf("names %v/%v, shortest %v; want fast/slow, 6", c["a"], c["b"], c["shortest_output_len"])
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBenchResponseFormat: --response-format sends the file's format on
// every request and reports the finish reasons.
func TestBenchResponseFormat(t *testing.T) {
	fake := &benchtest.Server{ShortBy: 2}
	schema := `{"json_schema": {"schema": "{\"type\":\"object\"}", "name": "obj"}}`
	m, err := benchJSON(t, fake, "--response-format", writeFile(t, "f.json", schema))
	if err != nil {
		t.Fatalf("runBench: %v", err)
	}
	if m["failed"] != 0.0 {
		t.Errorf("failed %v, want 0", m["failed"])
	}
	if diff := cmp.Diff(map[string]any{"eos": 9.0}, m["finish_reasons"]); diff != "" {
		t.Errorf("finish_reasons (-want +got):\n%s", diff)
	}
	if s, _ := m["response_format"].(string); !strings.Contains(s, "jsonSchema") {
		t.Errorf("response_format %q, want the format sent", s)
	}
	for _, r := range fake.Requests() {
		if got := r.GetResponseFormat().GetJsonSchema().GetSchema(); got != `{"type":"object"}` || r.GetStopping().GetIgnoreEos() {
			t.Errorf("request %s: schema %q, ignore_eos %v", r.GetRequestId(), got, r.GetStopping().GetIgnoreEos())
		}
	}
}

func TestBenchFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--format", "xml"},
		{"--requests", "5", "--duration", "1s"},
		{"--output-len", "0"},
		{"--workload", "nope"},
		{"--compare", "only-one.json"},
		{"extra"},
		{"--protocol", "rest"},
		{"--protocol", "openai", "--targets", "a:1,b:2"},
		{"--protocol", "openai", "--url", "http://127.0.0.1:1", "--requests", "1", "--warmup", "0"},
		{"--response-format", "/nonexistent/format.json"},
		{"--response-format", writeFile(t, "bad.json", `{"json_schema": {"schema": 1}}`)},
		{"--response-format", writeFile(t, "empty.json", `{}`)},
		{"--response-format", writeFile(t, "ok.json", `{"json_object": true}`), "--ignore-eos"},
		{"--response-format", writeFile(t, "ok.json", `{"json_object": true}`), "--protocol", "openai"},
		{"--prompt-copy", "--duration", "1s"},
	} {
		var out, errb bytes.Buffer
		if err := runBench(t.Context(), args, &out, &errb); err == nil {
			t.Errorf("runBench(%q) accepted", args)
		}
	}
}

func TestBenchSweep(t *testing.T) {
	addr := benchtest.Serve(t, &benchtest.Server{})
	var out, errb bytes.Buffer
	err := runBench(t.Context(), []string{"--addr", addr, "--requests", "6", "--warmup", "0", "--prompt-len", "8",
		"--output-len", "4", "--sweep-rates", "200,400", "--format", "json", "--slo-ttft", "1h"}, &out, &errb)
	if err != nil {
		t.Fatalf("sweep: %v\nstderr: %s", err, errb.String())
	}
	var m struct {
		Sweep []struct {
			Rate   float64        `json:"rate"`
			Result map[string]any `json:"result"`
		} `json:"sweep"`
	}
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Sweep) != 2 || m.Sweep[0].Rate != 200 || m.Sweep[1].Rate != 400 {
		t.Fatalf("sweep = %+v, want rates 200 and 400", m.Sweep)
	}
	for _, p := range m.Sweep {
		if p.Result["requests"] != 6.0 || p.Result["failed"] != 0.0 {
			t.Errorf("rate %v: requests %v failed %v", p.Rate, p.Result["requests"], p.Result["failed"])
		}
	}

	fake := &benchtest.Server{Fail: map[string]bool{"bench-2": true}}
	out.Reset()
	err = runBench(t.Context(), []string{"--addr", benchtest.Serve(t, fake), "--requests", "4", "--warmup", "0",
		"--output-len", "4", "--sweep-rates", "300"}, &out, &errb)
	if err == nil || !strings.Contains(out.String(), "failed") {
		t.Errorf("sweep with a failed request: err %v, table:\n%s", err, out.String())
	}
}

// TestBenchTargets: --targets with round_robin spreads the requests over
// every server, and by_target counts each one's requests and tokens.
func TestBenchTargets(t *testing.T) {
	a, b := benchtest.Serve(t, &benchtest.Server{}), benchtest.Serve(t, &benchtest.Server{})
	args := []string{"--targets", a + "," + b, "--lb", "round_robin", "--format", "json", "--requests", "10",
		"--concurrency", "1", "--warmup", "0", "--prompt-len", "8", "--output-len", "5", "--seed", "3"}
	var out, errb bytes.Buffer
	if err := runBench(t.Context(), args, &out, &errb); err != nil {
		t.Fatalf("runBench: %v\n%s", err, errb.String())
	}
	var res struct {
		ByTarget map[string]struct {
			Requests     int `json:"requests"`
			OutputTokens int `json:"output_tokens"`
		} `json:"by_target"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int{}
	for k, v := range res.ByTarget {
		got[k] = [2]int{v.Requests, v.OutputTokens}
	}
	want := map[string][2]int{a: {5, 25}, b: {5, 25}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("by_target (-want +got):\n%s", diff)
	}
}

func TestBenchBadLB(t *testing.T) {
	var out, errb bytes.Buffer
	err := runBench(t.Context(), []string{"--targets", "127.0.0.1:1", "--lb", "least_loaded"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "least_loaded") {
		t.Errorf("--lb least_loaded: err %v, want one naming the policy", err)
	}
}

// --prompt-copy sends each seed prompt for its continuation first and
// names the workload in the result.
func TestBenchPromptCopy(t *testing.T) {
	fake := &benchtest.Server{}
	m, err := benchJSON(t, fake, "--prompt-copy", "--output-lens", "6,50")
	if err != nil {
		t.Fatalf("runBench: %v", err)
	}
	if w, _ := m["workload"].(string); !strings.HasPrefix(w, "prompt copy Q G Q") {
		t.Errorf("workload %q, want it named a prompt copy", w)
	}
	copies := 0
	for _, r := range fake.Requests() {
		if strings.HasPrefix(r.GetRequestId(), "bench-copy-") {
			copies++
		} else if n := len(r.GetTokenIds().GetIds()); n < 2*8-1 {
			t.Errorf("%s: prompt of %d tokens, want Q G Q (at least %d)", r.GetRequestId(), n, 2*8-1)
		}
	}
	if copies != 10 {
		t.Errorf("%d continuations asked for, want 10 (9 requests and a warm-up)", copies)
	}
}
