package openai

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/scheduler"
)

// refusingScheduler refuses every request as if its queue were full, so a
// fuzzed request goes through decoding, validation and tokenization only.
type refusingScheduler struct{}

func (refusingScheduler) Submit(context.Context, scheduler.Request) (*scheduler.Stream, error) {
	return nil, scheduler.ErrQueueFull
}
func (refusingScheduler) Drain() {}
func (refusingScheduler) Limits() scheduler.Limits {
	return scheduler.Limits{ContextLen: 512, MaxPromptTokens: 511, MaxTokens: 512, DefaultMaxTokens: 256}
}

// newDoor is the Door of a test: over tok and tmpl, with sched's limits,
// logging nowhere; opts change its Config.
func newDoor(tb testing.TB, sched Scheduler, tok frontdoor.Tokenizer, tmpl frontdoor.ChatRenderer, opts ...func(*frontdoor.Config)) *frontdoor.Door {
	tb.Helper()
	cfg := frontdoor.Config{Tokenizer: tok, Chat: tmpl, Limits: sched.Limits(), Logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	d, err := frontdoor.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// FuzzDecode posts arbitrary bodies to both generation endpoints: no
// panic, and every answer is 429 (it got as far as the scheduler) or an
// OpenAI-shaped 4xx error.
func FuzzDecode(f *testing.F) {
	m, err := runtime.Load(shareddata.Path(f, "models/stories260K.gguf"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { m.Close() })
	h, err := New(Config{Scheduler: refusingScheduler{}, Door: newDoor(f, refusingScheduler{}, m.Tok, chat.Default()), Tokenizer: m.Tok,
		ModelNames: []string{"m"}, MaxBodyBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	h.SetServing(true)
	for _, seed := range []string{
		`{"model":"m","prompt":"Once upon a time","max_tokens":8,"stop":["\n"],"temperature":0.5}`,
		`{"model":"m","prompt":[1,2,3],"stop":"x","top_k":-1,"seed":-5}`,
		`{"model":"m","prompt":["a"],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","messages":[{"role":"user","content":"hi <|im_start|>"}],"max_completion_tokens":4}`,
		`{"model":"m","messages":[{"role":"system","content":[{"type":"text","text":"x"}]}],"n":2}`,
		`{"model":"m","prompt":"x","temperature":1e309}`, `[]`, `null`, `{"prompt":{}}`,
	} {
		f.Add(seed, true)
		f.Add(seed, false)
	}
	f.Fuzz(func(t *testing.T, body string, chat bool) {
		path := "/v1/completions"
		if chat {
			path = "/v1/chat/completions"
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		if w.Code == http.StatusTooManyRequests {
			return
		}
		if w.Code < 400 || w.Code >= 500 {
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
		var e errorBody
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("status %d, body %q is not an OpenAI error (%v)", w.Code, w.Body, err)
		}
	})
}

// FuzzToolRequest: chat requests with tools, tool_choice and tool
// messages, on a door with a template (ChatML, the generic fallback), are
// refused with an OpenAI error or reach the scheduler (which refuses
// them: 429), never a panic or a 5xx.
func FuzzToolRequest(f *testing.F) {
	m, err := runtime.Load(shareddata.Path(f, "models/stories260K.gguf"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { m.Close() })
	tmpl, err := chat.Fallback("chatml")
	if err != nil {
		f.Fatal(err)
	}
	h, err := New(Config{Scheduler: refusingScheduler{}, Door: newDoor(f, refusingScheduler{}, m.Tok, tmpl), Tokenizer: m.Tok,
		ModelNames: []string{"m"}, MaxBodyBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	h.SetServing(true)
	tool := `{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}`
	for _, seed := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[` + tool + `],"tool_choice":"required"}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[` + tool + `],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"2"}],"tools":[` + tool + `]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"$ref":"#/x"}}}}}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"custom"}],"tool_choice":"none"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
		if w.Code == http.StatusTooManyRequests {
			return
		}
		if w.Code < 400 || w.Code >= 500 {
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
		var e errorBody
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("status %d, body %q is not an OpenAI error (%v)", w.Code, w.Body, err)
		}
	})
}

// embedRefusingScheduler is refusingScheduler serving embeddings of 64
// values: a fuzzed embeddings request goes through decoding, the Door's
// checks and tokenizing, then is refused as if the queue were full.
type embedRefusingScheduler struct{ refusingScheduler }

func (embedRefusingScheduler) Limits() scheduler.Limits {
	l := refusingScheduler{}.Limits()
	l.EmbedDim, l.MaxEmbedTokens, l.MaxSeqs, l.VocabSize = 64, 512, 4, 512
	return l
}

// FuzzEmbeddingsDecode posts arbitrary bodies to /v1/embeddings: no
// panic, and every answer is 429 (it got as far as the scheduler) or an
// OpenAI-shaped 4xx error.
func FuzzEmbeddingsDecode(f *testing.F) {
	m, err := runtime.Load(shareddata.Path(f, "models/stories260K.gguf"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { m.Close() })
	sched := embedRefusingScheduler{}
	h, err := New(Config{Scheduler: sched, Door: newDoor(f, sched, m.Tok, nil), Tokenizer: m.Tok,
		ModelNames: []string{"m"}, MaxBodyBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	h.SetServing(true)
	for _, seed := range []string{
		`{"model":"m","input":"Once upon a time"}`,
		`{"model":"m","input":["a","b"],"encoding_format":"base64","dimensions":64}`,
		`{"model":"m","input":[1,2,3],"encoding_format":"float"}`,
		`{"model":"m","input":[[1,2],[3]],"dimensions":0}`,
		`{"model":"m","input":[[]],"user":"u"}`, `{"model":"m","input":[]}`, `{"model":"m","input":[1.5]}`,
		`{"model":"m","input":"\udc00"}`, `{"model":"m","input":[["a"]]}`, `{"model":"m"}`, `[]`, `null`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/embeddings", strings.NewReader(body)))
		if w.Code == http.StatusTooManyRequests {
			return
		}
		if w.Code < 400 || w.Code >= 500 {
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
		var e errorBody
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("status %d, body %q is not an OpenAI error (%v)", w.Code, w.Body, err)
		}
	})
}
