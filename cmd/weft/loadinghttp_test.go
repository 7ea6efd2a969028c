package main

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
)

// While the model loads, each HTTP door answers in its own error shape:
// the Messages routes Anthropic's (401 authentication_error without the
// key, taken as x-api-key; 529 overloaded_error with Retry-After with it),
// the OpenAI routes OpenAI's 503; /health 503.
func TestLoadingHTTPShapes(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := startLoadingHTTP(lis, nil, "secret")
	defer stop()
	base := "http://" + lis.Addr().String()
	post := func(path string, hdr map[string]string) (*http.Response, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp, body
	}
	anthropicType := func(body map[string]any) string {
		e, _ := body["error"].(map[string]any)
		if body["type"] != "error" || e == nil {
			return ""
		}
		s, _ := e["type"].(string)
		return s
	}
	for _, p := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		resp, body := post(p, nil)
		if resp.StatusCode != http.StatusUnauthorized || anthropicType(body) != "authentication_error" {
			t.Errorf("%s without a key: %d %v, want 401 in Anthropic's shape", p, resp.StatusCode, body)
		}
		resp, body = post(p, map[string]string{"X-Api-Key": "secret"})
		if resp.StatusCode != 529 || anthropicType(body) != "overloaded_error" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s while loading: %d %v (Retry-After %q), want 529 overloaded_error", p, resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
	}
	resp, body := post("/v1/chat/completions", map[string]string{"Authorization": "Bearer secret"})
	e, _ := body["error"].(map[string]any)
	if resp.StatusCode != http.StatusServiceUnavailable || e == nil || body["type"] != nil {
		t.Errorf("/v1/chat/completions while loading: %d %v, want 503 in OpenAI's shape", resp.StatusCode, body)
	}
	h, err := http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	h.Body.Close()
	if h.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/health while loading: %d, want 503", h.StatusCode)
	}
}
