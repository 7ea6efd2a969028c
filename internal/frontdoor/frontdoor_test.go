package frontdoor

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/tokenizer"
	"github.com/weft-inference/weft/scheduler"
)

// byteTok is one token per byte (id = byte + 3), BOS 1 added to chat
// prompts.
type byteTok struct{}

func (byteTok) Encode(text string, _, _ bool) []int32 {
	ids := make([]int32, len(text))
	for i := range len(text) {
		ids[i] = int32(text[i]) + 3
	}
	return ids
}

func (t byteTok) EncodeSegments(segs []tokenizer.Segment, addSpecial bool) []int32 {
	var ids []int32
	for _, s := range segs {
		ids = append(ids, t.Encode(s.Text, addSpecial, s.ParseSpecial)...)
	}
	return ids
}

func (byteTok) Decode(ids []int32) string {
	b := make([]byte, 0, len(ids))
	for _, id := range ids {
		if id >= 3 {
			b = append(b, byte(id-3))
		}
	}
	return string(b)
}

func (byteTok) VocabSize() int { return 3 + 256 }

func (byteTok) BOS() int32   { return 1 }
func (byteTok) AddBOS() bool { return true }

func newDoor(t *testing.T, ctxLen, maxBytes int) *Door {
	t.Helper()
	tmpl, err := chat.Fallback("plain")
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Tokenizer: byteTok{}, Chat: tmpl, MaxPromptBytes: maxBytes, Logger: slog.New(slog.DiscardHandler),
		Limits: scheduler.Limits{ContextLen: ctxLen, MaxPromptTokens: ctxLen - 1, MaxTokens: ctxLen, DefaultMaxTokens: 16}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRequestDefaults(t *testing.T) {
	d := newDoor(t, 100, 0)
	if d.MaxPromptBytes() != 100*PromptBytesPerToken {
		t.Errorf("MaxPromptBytes %d, want %d", d.MaxPromptBytes(), 100*PromptBytesPerToken)
	}
	set := func(n int) *int { return &n }
	for _, tc := range []struct {
		prompt    int
		maxTokens *int
		want      int
	}{{10, nil, 16}, {90, nil, 10}, {10, set(5), 5}, {10, set(1000), 1000}, {10, set(0), 0}, {10, set(-1), -1}} {
		r := d.Request("id", make([]int32, tc.prompt), Options{MaxTokens: tc.maxTokens})
		if r.MaxTokens != tc.want {
			t.Errorf("prompt %d, max_tokens %v: got %d, want %d", tc.prompt, tc.maxTokens, r.MaxTokens, tc.want)
		}
	}
	r := d.Request("id", []int32{5}, Options{SeedSet: true})
	if r.Sampling.Seed != 0 {
		t.Errorf("a set seed 0 became %d", r.Sampling.Seed)
	}
}

// TestChoiceSeeds: a seeded request's choice i samples with seed + i;
// an unseeded one's choices each get their own seed.
func TestChoiceSeeds(t *testing.T) {
	d := newDoor(t, 100, 0)
	o := Options{SeedSet: true}
	o.Sampling.Seed = 40
	var got []uint64
	for _, r := range d.Requests("id", []int32{5}, o, 3) {
		got = append(got, r.Sampling.Seed)
	}
	if diff := cmp.Diff([]uint64{40, 41, 42}, got); diff != "" {
		t.Errorf("seeded choices (-want +got):\n%s", diff)
	}
	rs := d.Requests("id", []int32{5}, Options{}, 3)
	if rs[0].Sampling.Seed == rs[1].Sampling.Seed && rs[1].Sampling.Seed == rs[2].Sampling.Seed {
		t.Errorf("unseeded choices share seed %d", rs[0].Sampling.Seed)
	}
}

func TestRequestID(t *testing.T) {
	for _, tc := range []struct {
		client string
		keep   bool
	}{{"abc-123", true}, {"", false}, {"has space", false}, {strings.Repeat("x", 128), true}, {strings.Repeat("x", 129), false}, {"caf\u00e9", false}} {
		ctx, id := WithRequestID(context.Background(), tc.client)
		if RequestID(ctx) != id {
			t.Errorf("%q: RequestID %q, returned %q", tc.client, RequestID(ctx), id)
		}
		if (id == tc.client) != tc.keep || (!tc.keep && len(id) != 16) {
			t.Errorf("client id %q became %q (keep %v)", tc.client, id, tc.keep)
		}
	}
}

func TestCheckPromptBytes(t *testing.T) {
	d := newDoor(t, 100, 10)
	if err := d.CheckPromptBytes("text", 10); err != nil {
		t.Errorf("10 bytes: %v", err)
	}
	err := d.CheckPromptBytes("text", 11)
	var be *BytesError
	if !errors.As(err, &be) || !errors.Is(err, ErrPromptBytes) || !TooLong(err) {
		t.Fatalf("11 bytes: %v", err)
	}
	if diff := cmp.Diff(BytesError{Field: "text", Bytes: 11, MaxBytes: 10, ContextLen: 100}, *be); diff != "" {
		t.Errorf("BytesError (-want +got):\n%s", diff)
	}
}

// A conversation over the context is refused with the scheduler's own
// error, or loses its oldest exchanges with DropOldest.
func TestChatPromptTruncation(t *testing.T) {
	d := newDoor(t, 60, 0)
	conv := []chat.Message{
		{Role: "system", Content: "s"},
		{Role: "user", Content: "aaaaaaaaaa"}, {Role: "assistant", Content: "b"},
		{Role: "user", Content: "cc"}, {Role: "assistant", Content: "d"},
	}
	msgs := append(conv, chat.Message{Role: "user", Content: "eeee"})
	// Rendered "role: content\n" lines plus BOS: 84 tokens with everything,
	// 54 without the first exchange; the context holds 59.
	_, _, err := d.ChatPrompt(context.Background(), msgs, len(conv), Reject)
	var le *scheduler.LimitError
	if !errors.As(err, &le) || !errors.Is(err, scheduler.ErrPromptTooLong) || le.Limit != 59 {
		t.Fatalf("Reject: %v, want the scheduler's prompt limit 59", err)
	}
	got, prompt, err := d.ChatPrompt(context.Background(), msgs, len(conv), DropOldest)
	if err != nil {
		t.Fatal(err)
	}
	want := []chat.Message{conv[0], conv[3], conv[4], msgs[5]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if prompt[0] != 1 || len(prompt) > 59 {
		t.Errorf("prompt %v: want BOS first and at most 59 tokens", prompt)
	}
	if _, _, err := d.ChatPrompt(context.Background(), []chat.Message{{Role: "user", Content: string(make([]byte, 70))}}, 0, DropOldest); !TooLong(err) {
		t.Errorf("a turn that cannot fit: %v", err)
	}
}

func TestNoChat(t *testing.T) {
	d, err := New(Config{Tokenizer: byteTok{}, Limits: scheduler.Limits{ContextLen: 8}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.ChatPrompt(context.Background(), nil, 0, Reject); !errors.Is(err, ErrNoChat) || d.HasChat() {
		t.Errorf("ChatPrompt without a renderer: %v", err)
	}
}
