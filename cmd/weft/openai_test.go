package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/cpu"
)

// TestServeHTTPGreedyMatchesGenerate: serve with --http-addr answers
// /v1/completions at temperature 0 with the same tokens and text as gRPC
// Generate (greedy) and as `weft generate` for the same prompt, on
// stories260K (F32); after shutdown, serve returns nil and the HTTP port
// is closed.
func TestServeHTTPGreedyMatchesGenerate(t *testing.T) {
	m, err := runtime.Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: "f32", Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hlis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseServeFlags([]string{"--backend", "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:8080" {
		t.Errorf("--http-addr default %q, want 127.0.0.1:8080", c.HTTPAddr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startWhenReady(t, func(ready chan<- struct{}) error {
		return serve(ctx, c, serveDeps{Model: m, Backend: b, Log: slog.New(slog.DiscardHandler), HTTP: hlis}, lis, nil, ready)
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	base := "http://" + hlis.Addr().String()

	const prompt = "Once upon a time, there was a little"
	const n = 24
	s, err := inferencev1.NewInferenceServiceClient(conn).Generate(ctx, &inferencev1.GenerateRequest{
		Prompt:   &inferencev1.GenerateRequest_Text{Text: prompt},
		Sampling: &inferencev1.SamplingParams{Temperature: 0},
		Stopping: &inferencev1.StoppingCriteria{MaxTokens: n, IgnoreEos: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	var wantIDs []int32
	for {
		r, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		want.WriteString(r.GetChunk().GetText())
		wantIDs = append(wantIDs, r.GetChunk().GetTokenIds()...)
	}
	var wantPieces []string
	for _, id := range wantIDs {
		wantPieces = append(wantPieces, string(m.Tok.TokenBytes(id)))
	}

	// weft generate (its own engine, no scheduler) picks the same tokens;
	// it stops at end-of-generation, so it may give a prefix of them.
	var gen bytes.Buffer
	if err := generateCmd(ctx, []string{"--model", shareddata.Path(t, "models/stories260K.gguf"), "--prompt", prompt,
		"--max-tokens", strconv.Itoa(n), "--temperature", "0", "--kv-type", "f32", "--format", "json"}, &gen, io.Discard); err != nil {
		t.Fatal(err)
	}
	var genRes generateResult
	if err := json.Unmarshal(gen.Bytes(), &genRes); err != nil {
		t.Fatal(err)
	}
	if len(genRes.TokenIDs) == 0 || len(genRes.TokenIDs) > len(wantIDs) {
		t.Fatalf("weft generate gave %d tokens, Generate %d", len(genRes.TokenIDs), len(wantIDs))
	}
	t.Logf("weft generate: %d of %d tokens (%s)", len(genRes.TokenIDs), len(wantIDs), genRes.FinishReason)
	if diff := cmp.Diff(wantIDs[:len(genRes.TokenIDs)], genRes.TokenIDs); diff != "" {
		t.Errorf("weft generate token ids (-Generate +generate):\n%s", diff)
	}

	client := oai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	params := oai.CompletionNewParams{
		Model:       oai.CompletionNewParamsModel(m.Name),
		Prompt:      oai.CompletionNewParamsPromptUnion{OfString: oai.String(prompt)},
		MaxTokens:   oai.Int(n),
		Temperature: oai.Float(0),
	}
	params.SetExtraFields(map[string]any{"ignore_eos": true})
	params.Logprobs = oai.Int(0) // lists the tokens
	got, err := client.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if want.Len() == 0 {
		t.Fatal("Generate returned no text")
	}
	if diff := cmp.Diff(want.String(), got.Choices[0].Text); diff != "" {
		t.Errorf("/v1/completions text (-Generate +HTTP):\n%s", diff)
	}
	if diff := cmp.Diff(wantPieces, got.Choices[0].Logprobs.Tokens); diff != "" {
		t.Errorf("/v1/completions tokens (-Generate +HTTP):\n%s", diff)
	}

	resp, err := http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("health while serving = %d, want 200", resp.StatusCode)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve returned %v", err)
	}
	if _, err := http.Get(base + "/health"); err == nil {
		t.Error("the HTTP port still answers after serve returned")
	}
}

// While the model loads, the HTTP port answers too: /health and the API
// 503 (the API's error in OpenAI's shape); then the same socket serves the
// model and /health turns 200.
func TestServeHTTPWhileLoading(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hlis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseServeFlags([]string{"--backend", "cpu", "--kv-memory", "4MiB"})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	load := func(serveConfig, *slog.Logger) (*runtime.Model, error) {
		<-release
		return runtime.LoadDefault()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- loadAndServe(ctx, c, serveDeps{Log: slog.New(slog.DiscardHandler), HTTP: hlis}, lis, nil, load, ready)
	}()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	base := "http://" + hlis.Addr().String()
	get := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(`{}`))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("GET", "/health"); code != http.StatusServiceUnavailable {
		t.Errorf("health while loading = %d, want 503", code)
	}
	if code, body := get("POST", "/v1/completions"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"service_unavailable"`) {
		t.Errorf("completions while loading = %d %s, want 503 with an OpenAI error", code, body)
	}
	close(release)
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("loadAndServe returned early: %v", err)
	}
	if code, _ := get("GET", "/health"); code != http.StatusOK {
		t.Errorf("health after loading = %d, want 200", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("loadAndServe returned %v", err)
	}
}

// The HTTP API takes serve's TLS config and auth token: HTTPS with the
// server's certificate, 401 without the token, 200 with it; /health needs
// no token.
func TestServeHTTPTLSAndAuth(t *testing.T) {
	m, err := runtime.Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: "f32", Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	certFile, keyFile, _ := writeCert(t, t.TempDir(), "weft-test")
	certs, err := newCertStore(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hlis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseServeFlags([]string{"--backend", "cpu", "--auth-token", "tok"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startWhenReady(t, func(ready chan<- struct{}) error {
		return serve(ctx, c, serveDeps{Model: m, Backend: b, Log: slog.New(slog.DiscardHandler), TLS: certs.config(), HTTP: hlis}, lis, nil, ready)
	})
	pemBytes, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := "https://" + hlis.Addr().String()
	status := func(path, token string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	got := []int{status("/health", ""), status("/v1/models", ""), status("/v1/models", "wrong"), status("/v1/models", "tok")}
	if diff := cmp.Diff([]int{200, 401, 401, 200}, got); diff != "" {
		t.Errorf("health, models without, with a wrong and with the token (-want +got):\n%s", diff)
	}
	// Plaintext is not served on the TLS port (net/http answers 400).
	if resp, err := http.Get("http://" + hlis.Addr().String() + "/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plaintext /health served on the TLS port")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve returned %v", err)
	}
}

// TestServedModelNameFlag: --served-model-name is repeatable and takes
// comma lists; without it the HTTP API serves the model's own name.
func TestServedModelNameFlag(t *testing.T) {
	c, err := parseServeFlags([]string{"--served-model-name", "a, b", "--served-model-name", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, servedNames(c.ServedNames, "gguf-name")); diff != "" {
		t.Errorf("served names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"gguf-name"}, servedNames(nil, "gguf-name")); diff != "" {
		t.Errorf("default served names (-want +got):\n%s", diff)
	}
	if _, err := parseServeFlags([]string{"--served-model-name", "a,,b"}); err == nil {
		t.Error("an empty id was accepted")
	}
}
