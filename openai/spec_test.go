package openai

import (
	"testing"

	oai "github.com/openai/openai-go/v3"

	"github.com/weft-inference/weft/scheduler"
)

// TestSpecUsage: with n-gram speculation, usage.completion_tokens_details
// reports the drafted tokens in OpenAI's Predicted Outputs fields: the
// accepted ones as accepted_prediction_tokens, the rest as
// rejected_prediction_tokens, equal to the scheduler's Final, read with
// the official client, streamed (include_usage) and not. A prompt that
// repeats itself makes the model repeat it, so the n-gram source drafts.
func TestSpecUsage(t *testing.T) {
	f := newSpecFixture(t, false, scheduler.SpecConfig{Source: scheduler.SpecNgram})
	ctx := t.Context()
	const line = "Lily and Ben went to the park. They played with a ball. "
	params := oai.CompletionNewParams{
		Model:       oai.CompletionNewParamsModel(f.model),
		Prompt:      oai.CompletionNewParamsPromptUnion{OfString: oai.String(line + line + line)},
		MaxTokens:   oai.Int(48),
		Temperature: oai.Float(0),
	}
	params.SetExtraFields(map[string]any{"ignore_eos": true})
	check := func(name string, u oai.CompletionUsage) {
		t.Helper()
		fin := <-f.finals
		if fin.DraftTokens == 0 {
			t.Fatalf("%s: nothing was drafted, so the usage says nothing of drafts (the test checks nothing)", name)
		}
		d := u.CompletionTokensDetails
		if d.AcceptedPredictionTokens != int64(fin.AcceptedTokens) || d.RejectedPredictionTokens != int64(fin.DraftTokens-fin.AcceptedTokens) {
			t.Errorf("%s: accepted %d, rejected %d prediction tokens; the Final drafted %d and accepted %d",
				name, d.AcceptedPredictionTokens, d.RejectedPredictionTokens, fin.DraftTokens, fin.AcceptedTokens)
		}
		if u.CompletionTokens != 48 {
			t.Errorf("%s: %d completion tokens, want 48", name, u.CompletionTokens)
		}
	}
	got, err := f.client.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	check("completion", got.Usage)

	params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
	s := f.client.Completions.NewStreaming(ctx, params)
	var usage oai.CompletionUsage
	for s.Next() {
		if c := s.Current(); c.Usage.TotalTokens > 0 {
			usage = c.Usage
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	check("streamed completion", usage)

	chat := oai.ChatCompletionNewParams{
		Model:       oai.ChatModel(f.model),
		Messages:    []oai.ChatCompletionMessageParamUnion{oai.UserMessage(line + line + line)},
		MaxTokens:   oai.Int(48),
		Temperature: oai.Float(0),
	}
	chat.SetExtraFields(map[string]any{"ignore_eos": true})
	cc, err := f.client.Chat.Completions.New(ctx, chat)
	if err != nil {
		t.Fatal(err)
	}
	check("chat completion", cc.Usage)
}
