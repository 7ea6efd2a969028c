package openai

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

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

// FuzzResponsesDecode feeds outside bytes to /v1/responses' decoder: the
// conversation it builds, when it and frontdoor.CheckToolMessages accept
// one, has valid UTF-8, known roles, JSON call arguments and tool
// messages that answer an earlier call; a refusal is a 400. Through the handler (ChatML, the generic tool fallback)
// every answer is an OpenAI-shaped 4xx or reaches the scheduler (429),
// never a panic or a 5xx.
func FuzzResponsesDecode(f *testing.F) {
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
	tool := `{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}`
	for _, seed := range []string{
		`{"model":"m","input":"hi","instructions":"be brief","max_output_tokens":8,"temperature":0.5,"top_p":0.9}`,
		`{"model":"m","input":[{"role":"developer","content":[{"type":"input_text","text":"x"}]},{"type":"message","role":"user","content":"y"}],"stream":true}`,
		`{"model":"m","input":[{"role":"user","content":"hi"},{"type":"reasoning","summary":[{"type":"summary_text","text":"r"}]},` +
			`{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c1","output":"2"}],"tools":[` + tool + `]}`,
		`{"model":"m","input":"hi","tools":[` + tool + `],"tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":false}`,
		`{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"}}},"reasoning":{"effort":"high"}}`,
		`{"model":"m","input":"hi","store":true,"previous_response_id":"resp_1"}`,
		`{"model":"m","input":"hi","include":["message.output_text.logprobs","reasoning.encrypted_content"],"top_logprobs":3}`,
		`{"model":"m","input":[{"type":"item_reference","id":"x"}]}`,
		`{"model":"m","input":[{"role":"assistant","content":[{"type":"output_text","text":"a"}]},{"type":"function_call","call_id":"c","name":"f"}]}`,
		`{"model":"m","input":[]}`, `{"model":"m","input":{}}`, `[]`, `null`, ``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var req responsesRequest
		if json.Unmarshal([]byte(body), &req) == nil {
			msgs, src, err := respConversation(&req)
			if err == nil {
				err = src.rename(frontdoor.CheckToolMessages(msgs, 0))
			}
			if err != nil {
				if e := apiErrorOf(err); e.status != http.StatusBadRequest || e.Param == nil {
					t.Fatalf("conversation error %v: status %d, param %v; want a 400 naming a parameter", err, e.status, e.Param)
				}
				msgs = nil
			}
			calls := map[string]bool{}
			for i, m := range msgs {
				if !utf8.ValidString(m.Content) || !utf8.ValidString(m.ReasoningContent) {
					t.Errorf("message %d: not valid UTF-8", i)
				}
				switch m.Role {
				case "system", "user", "assistant":
				case "tool":
					if !calls[m.ToolCallID] {
						t.Errorf("message %d answers call %q, which no earlier message made", i, m.ToolCallID)
					}
				default:
					t.Errorf("message %d: role %q", i, m.Role)
				}
				for _, c := range m.ToolCalls {
					calls[c.ID] = true
					if c.Arguments != "" && !json.Valid([]byte(c.Arguments)) {
						t.Errorf("message %d: call arguments %q not JSON", i, c.Arguments)
					}
				}
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body)))
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

// FuzzTokenizeDecode posts arbitrary bodies to /tokenize and /detokenize:
// no panic, no 5xx; a 200 is the door's reply shape (on /tokenize a count
// equal to its tokens, every id in the vocabulary), anything else an
// OpenAI-shaped 4xx error.
func FuzzTokenizeDecode(f *testing.F) {
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
		`{"prompt":"Once upon a time"}`, `{"model":"m","prompt":"hi","add_special_tokens":false}`,
		`{"model":"m","messages":[{"role":"user","content":"Tell me a story."}]}`,
		`{"messages":[{"role":"user","content":"x"}],"add_generation_prompt":false}`,
		`{"prompt":"a","messages":[]}`, `{"model":"gpt-4","prompt":"a"}`, `{"prompt":"\udc00"}`, `{}`, `[]`, `null`,
		`{"tokens":[403,407,261,378]}`, `{"tokens":[-1]}`, `{"tokens":[999999]}`, `{"tokens":[]}`, `{"tokens":"x"}`,
	} {
		f.Add("/tokenize", seed)
		f.Add("/detokenize", seed)
	}
	f.Fuzz(func(t *testing.T, path, body string) {
		if path != "/tokenize" {
			path = "/detokenize"
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		switch {
		case w.Code == http.StatusOK && path == "/tokenize":
			var r tokenizeResponse
			if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || r.Count != len(r.Tokens) {
				t.Fatalf("%s %q: 200 with %q (%v)", path, body, w.Body, err)
			}
			for _, id := range r.Tokens {
				if id < 0 || int(id) >= m.Tok.VocabSize() {
					t.Fatalf("%s %q: token %d outside the vocabulary", path, body, id)
				}
			}
		case w.Code == http.StatusOK:
			var r detokenizeResponse
			if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
				t.Fatalf("%s %q: 200 with %q (%v)", path, body, w.Body, err)
			}
		case w.Code >= 400 && w.Code < 500:
			var e errorBody
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("%s: status %d, body %q is not an OpenAI error (%v)", path, w.Code, w.Body, err)
			}
		default:
			t.Fatalf("%s %q: status %d: %s", path, body, w.Code, w.Body)
		}
	})
}
