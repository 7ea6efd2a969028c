package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weft-inference/weft/bench/benchtest"
)

// A prompt-copy request is its seed prompt Q, the continuation G, and Q
// again (BOS once); without a continuation it is the seed alone. The seed
// is shortened so that Q G Q and the output fit the context.
func TestWorkloadPromptCopy(t *testing.T) {
	w := testWorkload(7, Fixed{N: 5})
	w.Copy = true
	q := w.Request(3)
	g := Continuation{Tokens: []int32{900, 901, 902, 903, 904}, Text: " x y"}
	w.Continuations = map[int]Continuation{3: g}
	got := w.Request(3)
	want := slices.Concat(q.Prompt, g.Tokens, q.Prompt[1:])
	if diff := cmp.Diff(want, got.Prompt); diff != "" {
		t.Errorf("copy prompt (-want +got):\n%s", diff)
	}
	if got.OutputLen != q.OutputLen || got.Index != 3 {
		t.Errorf("copy request: output %d index %d, want %d and 3", got.OutputLen, got.Index, q.OutputLen)
	}
	if other := w.Request(4); other.Prompt[0] != 1 || len(other.Prompt) > 40 {
		t.Errorf("request 4 has no continuation: want its seed, got %v", other.Prompt)
	}

	w.Vocab, w.Words, w.Continuations = nil, []string{"a", "b"}, nil
	qt := w.Request(3).Text
	w.Continuations = map[int]Continuation{}
	w.Continuations[3] = g
	if got, want := w.Request(3).Text, qt+" x y "+qt; got != want {
		t.Errorf("text copy prompt %q, want %q", got, want)
	}

	short := &Workload{Seed: 1, PromptLen: Fixed{N: 100}, OutputLen: Fixed{N: 30}, Vocab: []int32{5}, BOS: 1, MaxTotal: 120, Copy: true}
	if err := short.validate(); err != nil {
		t.Fatal(err)
	}
	if n := len(short.Request(0).Prompt); 2*n+2*30 > 120 {
		t.Errorf("seed of %d tokens: Q G Q and G (%d) exceed the context of 120", n, 2*n+60)
	}
	short.OutputLen = Fixed{N: 60}
	if err := short.validate(); err == nil {
		t.Error("outputs of 60 in a context of 120 cannot be copied; validate accepted them")
	}
}

// Run with PromptCopy first asks the server for each seed's continuation,
// then sends Q G Q where G is exactly what the server answered for that Q.
func TestRunPromptCopy(t *testing.T) {
	// The fake's output depends on the prompt, so a G sent with another
	// request's Q would not match.
	fake := &benchtest.Server{TokenAt: func(p []int32, i int) int32 {
		sum := 0
		for _, id := range p {
			sum += int(id)
		}
		return int32(11 + (sum+7*i)%(benchtest.VocabSize-11))
	}}
	cfg := Config{Concurrency: 2, Requests: 4, Warmup: 1, Seed: 9,
		PromptLen: Fixed{N: 6}, OutputLen: Fixed{N: 5}, IgnoreEOS: true, PromptCopy: true}
	res, err := Run(t.Context(), dial(t, fake), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil || res.Completed != 4 {
		t.Fatalf("completed %d, err %v", res.Completed, err)
	}
	seeds := map[string][]int32{}
	var measured []string
	for _, r := range fake.Requests() {
		id, p := r.GetRequestId(), r.GetTokenIds().GetIds()
		if i, ok := strings.CutPrefix(id, "bench-copy-"); ok {
			if len(measured) > 0 {
				t.Errorf("continuation %s asked for after the run began", id)
			}
			seeds[i] = p
			continue
		}
		measured = append(measured, id)
		q := seeds[strings.TrimPrefix(id, "bench-")]
		if len(q) != 6 {
			t.Fatalf("%s: no seed prompt of 6 tokens was continued first (%v)", id, q)
		}
		g := make([]int32, 5)
		for k := range g {
			g[k] = fake.TokenAt(q, k)
		}
		if diff := cmp.Diff(slices.Concat(q, g, q[1:]), p); diff != "" {
			t.Errorf("%s: prompt is not Q G Q (-want +got):\n%s", id, diff)
		}
	}
	if len(seeds) != 5 || len(measured) != 5 {
		t.Errorf("%d continuations and %d requests, want 5 and 5 (one warm-up)", len(seeds), len(measured))
	}

	cfg.Requests, cfg.Duration = 0, 1
	if _, err := Run(t.Context(), dial(t, fake), cfg); err == nil {
		t.Error("a prompt copy over a duration: want an error")
	}
}

// Over the OpenAI protocol a continuation is a plain completion's text and
// the measured prompt is Q, G, a space, Q; drafted and accepted tokens are
// read from llama-server's timings and from weft's usage alike.
func TestRunOpenAIPromptCopy(t *testing.T) {
	var mu sync.Mutex
	var streamed []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Prompt string `json:"prompt"`
			Stream bool   `json:"stream"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		g := fmt.Sprintf(" g%d", len(body.Prompt))
		if !body.Stream {
			fmt.Fprintf(w, `{"choices":[{"text":%q}]}`, g)
			return
		}
		mu.Lock()
		streamed = append(streamed, body.Prompt)
		first := len(streamed) == 1
		mu.Unlock()
		// The first reply counts drafts as llama-server does, the second
		// as weft does.
		last := `{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3},"timings":{"draft_n":4,"draft_n_accepted":3}}`
		if !first {
			last = `{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"completion_tokens_details":{"reasoning_tokens":0,"accepted_prediction_tokens":2,"rejected_prediction_tokens":1}}}`
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\ndata: %s\n\ndata: [DONE]\n\n",
			`{"choices":[{"text":"abc","finish_reason":"length"}]}`, last)
	}))
	defer srv.Close()
	cfg := Config{Concurrency: 1, Requests: 2, Seed: 4, PromptLen: Fixed{N: 3}, OutputLen: Fixed{N: 3}, IgnoreEOS: true, PromptCopy: true}
	res, err := RunOpenAI(t.Context(), OpenAIConfig{URL: srv.URL, Model: "m"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	w := &Workload{Seed: 4, PromptLen: Fixed{N: 3}, OutputLen: Fixed{N: 3}, Words: PromptWords}
	for i, p := range streamed {
		q := w.Request(i).Text
		if want := q + fmt.Sprintf(" g%d", len(q)) + " " + q; p != want {
			t.Errorf("request %d: prompt %q, want %q", i, p, want)
		}
	}
	if len(streamed) != 2 {
		t.Errorf("%d streamed requests, want 2", len(streamed))
	}
	if res.DraftTokens != 7 || res.AcceptedDraftTokens != 5 {
		t.Errorf("drafted %d accepted %d from llama-server's timings and weft's usage, want 4+3 and 3+2", res.DraftTokens, res.AcceptedDraftTokens)
	}
}
