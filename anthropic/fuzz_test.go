package anthropic

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzDecode feeds outside bytes to the request decoder and the
// conversation check: never a panic; an error is a 400 requestError; an
// accepted conversation has valid UTF-8 contents and only user and
// assistant turns after at most one leading system message.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":8,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"x","name":"f","input":{}}]}]}`,
		`{"model":"m","max_tokens":8,"tools":[],"messages":[]}`,
		`{"messages":[{"role":"user","content":[{"type":"text"}]}]}`,
		`{"system":7,"messages":[{"role":"user","content":null}]}`,
		`{"messages":[{"role":"user","content":"\ud800"}]}`,
		`[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeRequest(body)
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) || re.status != 400 {
				t.Fatalf("decode error %v is not a 400 requestError", err)
			}
			return
		}
		msgs, err := conversation(req)
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) || re.status != 400 {
				t.Fatalf("conversation error %v is not a 400 requestError", err)
			}
			return
		}
		for i, m := range msgs {
			if !utf8.ValidString(m.Content) {
				t.Errorf("message %d: content not valid UTF-8", i)
			}
			if m.Role == "system" && i != 0 || m.Role != "system" && m.Role != "user" && m.Role != "assistant" {
				t.Errorf("message %d: role %q", i, m.Role)
			}
		}
	})
}
