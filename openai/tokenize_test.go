package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
)

// postJSON sends body as JSON to path with the test token and decodes the
// answer into out; it returns the status.
func (f *fixture) postJSON(t *testing.T, path string, body any, out any) int {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), "POST", f.srv.URL+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s: status %d, body not JSON: %v", path, resp.StatusCode, err)
	}
	return resp.StatusCode
}

// TestTokenize: /tokenize counts a prompt as /v1/completions does and
// chat messages as /v1/chat/completions does (the same prompt tokens);
// /detokenize turns the tokens back into the text.
func TestTokenize(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	const prompt = "Once upon a time"
	var tok tokenizeResponse
	if st := f.postJSON(t, "/tokenize", map[string]any{"model": f.model, "prompt": prompt}, &tok); st != 200 {
		t.Fatalf("status %d", st)
	}
	cmpl, err := f.client.Completions.New(ctx, oai.CompletionNewParams{
		Model:     oai.CompletionNewParamsModel(f.model),
		Prompt:    oai.CompletionNewParamsPromptUnion{OfString: oai.String(prompt)},
		MaxTokens: oai.Int(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctxLen := f.sched.Limits().ContextLen
	if diff := cmp.Diff([]int{int(cmpl.Usage.PromptTokens), int(cmpl.Usage.PromptTokens), ctxLen},
		[]int{tok.Count, len(tok.Tokens), tok.MaxModelLen}); diff != "" {
		t.Errorf("count, tokens, max_model_len (-want +got):\n%s", diff)
	}
	var plain tokenizeResponse
	f.postJSON(t, "/tokenize", map[string]any{"prompt": prompt, "add_special_tokens": false}, &plain)
	if diff := cmp.Diff(tok.Tokens[1:], plain.Tokens); diff != "" {
		t.Errorf("without special tokens: not the same tokens less BOS (-want +got):\n%s", diff)
	}
	var de detokenizeResponse
	if st := f.postJSON(t, "/detokenize", map[string]any{"tokens": plain.Tokens}, &de); st != 200 || de.Prompt != prompt {
		t.Errorf("detokenize: status %d, %q; want 200, %q", st, de.Prompt, prompt)
	}

	msgs := []map[string]any{{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "Tell me a story."}}
	var chatTok, noGen tokenizeResponse
	f.postJSON(t, "/tokenize", map[string]any{"model": f.model, "messages": msgs}, &chatTok)
	f.postJSON(t, "/tokenize", map[string]any{"messages": msgs, "add_generation_prompt": false}, &noGen)
	cc, err := f.client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{
		Model:               oai.ChatModel(f.model),
		Messages:            []oai.ChatCompletionMessageParamUnion{oai.SystemMessage("You tell stories."), oai.UserMessage("Tell me a story.")},
		MaxCompletionTokens: oai.Int(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	if chatTok.Count != int(cc.Usage.PromptTokens) {
		t.Errorf("messages: %d tokens, the chat request's prompt %d", chatTok.Count, cc.Usage.PromptTokens)
	}
	if noGen.Count == 0 || noGen.Count >= chatTok.Count || !cmp.Equal(noGen.Tokens, chatTok.Tokens[:noGen.Count]) {
		t.Errorf("without the generation prompt: %v, want a proper prefix of %v", noGen.Tokens, chatTok.Tokens)
	}
}

// TestTokenizeErrors: refusals in OpenAI's error shape, naming the
// parameter.
func TestTokenizeErrors(t *testing.T) {
	f := newFixture(t, false)
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	for _, tc := range []struct {
		name, path string
		body       map[string]any
		status     int
		param      string
	}{
		{"neither prompt nor messages", "/tokenize", map[string]any{}, 400, "prompt"},
		{"both", "/tokenize", map[string]any{"prompt": "a", "messages": msgs}, 400, "prompt"},
		{"special tokens with messages", "/tokenize", map[string]any{"messages": msgs, "add_special_tokens": true}, 400, "add_special_tokens"},
		{"generation prompt with a prompt", "/tokenize", map[string]any{"prompt": "a", "add_generation_prompt": true}, 400, "add_generation_prompt"},
		{"bad role", "/tokenize", map[string]any{"messages": []map[string]any{{"role": "robot", "content": "x"}}}, 400, "messages[0].role"},
		{"unknown model", "/tokenize", map[string]any{"model": "gpt-4", "prompt": "a"}, 404, "model"},
		{"token out of the vocabulary", "/detokenize", map[string]any{"tokens": []int{1, 1 << 20}}, 400, "tokens"},
		{"negative token", "/detokenize", map[string]any{"tokens": []int{-1}}, 400, "tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var eb errorBody
			st := f.postJSON(t, tc.path, tc.body, &eb)
			param := ""
			if eb.Error.Param != nil {
				param = *eb.Error.Param
			}
			if diff := cmp.Diff([]any{tc.status, tc.param}, []any{st, param}); diff != "" {
				t.Errorf("status, param (-want +got):\n%s\nmessage: %s", diff, eb.Error.Message)
			}
		})
	}
}
