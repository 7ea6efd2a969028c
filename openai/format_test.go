package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// post sends body to path and decodes the JSON answer.
func (f *fixture) post(t *testing.T, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	// The fixture reports each request's final on a bounded channel: keep
	// it from filling up.
	for drained := false; !drained; {
		select {
		case <-f.finals:
		default:
			drained = true
		}
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: %v: %s", path, err, data)
	}
	return resp.StatusCode, out
}

func TestStructuredOutput(t *testing.T) {
	f := newFixture(t, false)
	schema := `{"type":"object","properties":{"name":{"type":"string","enum":["Lily","Tom"]},"age":{"type":"integer","minimum":1,"maximum":9}},"required":["name","age"],"additionalProperties":false}`
	for _, tc := range []struct {
		path, extra string
		check       func(string) bool
		runsOn      bool // stories260K's keys run on as story text: outputs may all hit max_tokens
	}{
		{"/v1/chat/completions", `"response_format":{"type":"json_schema","json_schema":{"name":"kid","strict":true,"schema":` + schema + `}}`,
			regexp.MustCompile(`^\{"name":"(Lily|Tom)","age":[1-9]\}$`).MatchString, false},
		{"/v1/chat/completions", `"response_format":{"type":"json_object"}`,
			func(s string) bool { var m map[string]any; return json.Unmarshal([]byte(s), &m) == nil }, true},
		{"/v1/completions", `"guided_choice":["yes","no"]`, func(s string) bool { return s == "yes" || s == "no" }, false},
		{"/v1/completions", `"guided_regex":"[0-9]{3}-[a-z]{2}"`, regexp.MustCompile(`^[0-9]{3}-[a-z]{2}$`).MatchString, false},
		{"/v1/completions", `"guided_grammar":"root ::= \"(\" [a-c]{1,3} \")\""`, regexp.MustCompile(`^\([a-c]{1,3}\)$`).MatchString, false},
		{"/v1/completions", `"guided_json":` + schema, regexp.MustCompile(`^\{"name":"(Lily|Tom)","age":[1-9]\}$`).MatchString, false},
	} {
		stopped := 0
		for seed := range 3 {
			body := `{"model":"` + f.model + `","max_tokens":400,"temperature":1,"seed":` + string(rune('0'+seed)) + `,` + tc.extra
			if tc.path == "/v1/completions" {
				body += `,"prompt":"Once upon a time"}`
			} else {
				body += `,"messages":[{"role":"user","content":"Who?"}]}`
			}
			code, out := f.post(t, tc.path, body)
			if code != http.StatusOK {
				t.Fatalf("%s %s: %d %v", tc.path, tc.extra, code, out)
			}
			choice := out["choices"].([]any)[0].(map[string]any)
			text, _ := choice["text"].(string)
			if msg, ok := choice["message"].(map[string]any); ok {
				text, _ = msg["content"].(string)
			}
			if choice["finish_reason"] != "stop" {
				if !strings.HasPrefix(text, "{") && tc.runsOn {
					t.Errorf("%s %s seed %d: cut output %q does not start an object", tc.path, tc.extra, seed, text)
				}
				continue
			}
			stopped++
			if !tc.check(text) {
				t.Errorf("%s %s seed %d: %q", tc.path, tc.extra, seed, text)
			}
		}
		if stopped == 0 && !tc.runsOn {
			t.Errorf("%s %s: no output ended within max_tokens", tc.path, tc.extra)
		}
	}
	for _, tc := range []struct{ extra, want string }{
		{`"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"string","contentEncoding":"x"}}}`, "contentEncoding"},
		{`"response_format":{"type":"yaml"}`, "yaml"},
		{`"guided_regex":"(","guided_choice":["a"]`, "only one of"},
		{`"guided_grammar":"start ::= \"a\""`, "root"},
	} {
		code, out := f.post(t, "/v1/completions", `{"model":"`+f.model+`","prompt":"Hi",`+tc.extra+`}`)
		msg, _ := json.Marshal(out)
		if code != http.StatusBadRequest || !bytes.Contains(msg, []byte(tc.want)) {
			t.Errorf("%s: %d %s, want 400 naming %q", tc.extra, code, msg, tc.want)
		}
	}
}
