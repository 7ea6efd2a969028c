package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/server"
)

// result is how one request ended: its terminal outcome, the tokens the
// client saw generated, and what broke the rules ("" when nothing did).
type result struct {
	outcome string
	tokens  int
	bad     string
}

func badf(outcome, format string, args ...any) result {
	return result{outcome: outcome, bad: fmt.Sprintf(format, args...)}
}

// soakKind is one kind of request, picked with probability weight/sum.
type soakKind struct {
	name   string
	weight int
	run    func(ctx context.Context, s *soak, rng *rand.Rand) result
}

var soakKinds = []soakKind{
	{"grpc_generate", 12, func(ctx context.Context, s *soak, rng *rand.Rand) result {
		return s.generate(ctx, genRequest(rng, false), genOpts{cancelAfter: -1})
	}},
	{"grpc_generate_cancel", 8, func(ctx context.Context, s *soak, rng *rand.Rand) result {
		o := genOpts{cancelAfter: -1}
		if rng.IntN(2) == 0 {
			o.cancelAfter = rng.IntN(40) // 0: as soon as the stream opens
		} else {
			o.cancelDelay = time.Duration(rng.IntN(300)) * time.Millisecond
		}
		return s.generate(ctx, genRequest(rng, false), o)
	}},
	{"grpc_generate_json", 5, func(ctx context.Context, s *soak, rng *rand.Rand) result {
		return s.generate(ctx, genRequest(rng, true), genOpts{cancelAfter: -1, json: true})
	}},
	{"grpc_slow_reader", 4, func(ctx context.Context, s *soak, rng *rand.Rand) result {
		return s.generate(ctx, genRequest(rng, false), genOpts{cancelAfter: -1, slow: 20 * time.Millisecond, rng: rng})
	}},
	{"grpc_stalled_reader", 3, func(ctx context.Context, s *soak, rng *rand.Rand) result {
		return s.generate(ctx, genRequest(rng, false), genOpts{cancelAfter: -1, stallAfter: 1 + rng.IntN(5),
			stallFor: s.plan.stall(rng), giveUp: rng.IntN(2) == 0})
	}},
	{"grpc_chat", 10, func(ctx context.Context, s *soak, rng *rand.Rand) result { return s.chat(ctx, rng) }},
	{"grpc_chat_tools", 6, func(ctx context.Context, s *soak, rng *rand.Rand) result { return s.chatTools(ctx, rng) }},
	{"grpc_embed", 4, func(ctx context.Context, s *soak, rng *rand.Rand) result { return s.embed(ctx, rng) }},
	{"grpc_unary", 3, func(ctx context.Context, s *soak, rng *rand.Rand) result { return s.grpcUnary(ctx, rng) }},
	{"grpc_bad_input", 4, func(ctx context.Context, s *soak, rng *rand.Rand) result { return s.grpcBad(ctx, rng) }},
	{"grpc_tcp_reset", 2, func(ctx context.Context, s *soak, rng *rand.Rand) result { return s.grpcReset(ctx, rng) }},
	{"http_completion", 6, func(ctx context.Context, s *soak, rng *rand.Rand) result {
		return s.openAI(ctx, "/v1/completions", completionBody(rng, false), sseOpts{cancelAfter: -1})
	}},
	{"http_completion_stream", 6, func(ctx context.Context, s *soak, rng *rand.Rand) result {
		return s.openAI(ctx, "/v1/completions", completionBody(rng, true), sseOpts{cancelAfter: -1})
	}},
	{"http_chat", 6, func(ctx context.Context, s *soak, rng *rand.Rand) result {
		b, js := chatBody(rng, false)
		return s.openAI(ctx, "/v1/chat/completions", b, sseOpts{cancelAfter: -1, json: js})
	}},
	{"http_chat_stream", 6, func(ctx context.Context, s *soak, rng *rand.Rand) result {
		b, js := chatBody(rng, true)
		return s.openAI(ctx, "/v1/chat/completions", b, sseOpts{cancelAfter: -1, json: js})
	}},
	{"http_cancel", 6, func(ctx context.Context, s *soak, rng *rand.Rand) result {
		b, _ := chatBody(rng, true)
		return s.openAI(ctx, "/v1/chat/completions", b, sseOpts{cancelAfter: rng.IntN(30)})
	}},
	{"http_slow_reader", 3, func(ctx context.Context, s *soak, rng *rand.Rand) result {
		return s.openAI(ctx, "/v1/completions", completionBody(rng, true), sseOpts{cancelAfter: -1, slow: 20 * time.Millisecond, rng: rng})
	}},
	{"http_stalled_reader", 3, func(ctx context.Context, s *soak, rng *rand.Rand) result {
		b, _ := chatBody(rng, true)
		return s.openAI(ctx, "/v1/chat/completions", b, sseOpts{cancelAfter: -1, stallAfter: 1 + rng.IntN(5),
			stallFor: s.plan.stall(rng), giveUp: rng.IntN(2) == 0})
	}},
	{"http_chat_tools", 5, func(ctx context.Context, s *soak, rng *rand.Rand) result {
		b, choice := chatToolsBody(rng)
		return s.openAI(ctx, "/v1/chat/completions", b, sseOpts{cancelAfter: -1, tools: choice})
	}},
	{"http_embeddings", 4, func(ctx context.Context, s *soak, rng *rand.Rand) result { return s.embeddings(ctx, rng) }},
	{"http_messages", 4, func(ctx context.Context, s *soak, rng *rand.Rand) result { return s.messages(ctx, rng) }},
	{"http_bad_input", 4, func(ctx context.Context, s *soak, rng *rand.Rand) result { return s.httpBad(ctx, rng) }},
	{"http_tcp_reset", 2, func(ctx context.Context, s *soak, rng *rand.Rand) result { return s.httpReset(ctx, rng) }},
}

// childKind runs `weft chat` as a child process and kills it (SIGKILL)
// while its reply streams.
var childKind = soakKind{"child_killed", 0, func(ctx context.Context, s *soak, rng *rand.Rand) result { return s.childKilled(ctx, rng) }}

func pickKind(rng *rand.Rand) soakKind {
	sum := 0
	for _, k := range soakKinds {
		sum += k.weight
	}
	n := rng.IntN(sum)
	for _, k := range soakKinds {
		if n -= k.weight; n < 0 {
			return k
		}
	}
	panic("unreachable")
}

// runOne runs one request of kind k and records its outcome. A request
// that has no outcome after the plan's request limit is cancelled and
// counted lost.
func (s *soak) runOne(ctx context.Context, k soakKind, rng *rand.Rand) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lost atomic.Bool
	timer := time.AfterFunc(s.plan.requestLimit, func() { lost.Store(true); cancel() })
	r := k.run(ctx, s, rng)
	timer.Stop()
	if lost.Load() {
		r = badf("lost", "no terminal outcome within %v (it became %q when cancelled)", s.plan.requestLimit, r.outcome)
	}
	if r.bad != "" {
		s.violate(k.name, "%s", r.bad)
	}
	s.tally.record(k.name, r.outcome, r.tokens)
}

var prompts = []string{
	"Once upon a time", "The little dog", "One day, a girl named Lily", "Tom and his mom went to the park.",
	"There was a big red ball", "The sun was shining and", "A cat sat on the mat. It", "Sam found a box",
}

var chatLines = []string{
	"Tell me a story about a dog.", "What did the girl find?", "Why was the cat sad?", "Say something nice.",
	"What happened next?", "Tell me about the park.", "Who is your friend?",
}

// storyOpening starts every long prompt, so that their first blocks come
// from the prefix cache while the rest differs.
const storyOpening = "Once upon a time, in a small town by the sea, there lived a kind old man who had a little dog and a big garden. "

// longText is a long prompt: the opening and 10 to 39 of the short
// prompts, about 120 to 380 tokens of stories260K.
func longText(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteString(storyOpening)
	for range 10 + rng.IntN(30) {
		b.WriteString(prompts[rng.IntN(len(prompts))])
		b.WriteString(" ")
	}
	return b.String()
}

// promptText is a short prompt, or one time in four a long one.
func promptText(rng *rand.Rand) string {
	if rng.IntN(4) == 0 {
		return longText(rng)
	}
	return prompts[rng.IntN(len(prompts))]
}

// personSchema is the structured-output schema of the json kinds.
const personSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":20},"age":{"type":"integer","minimum":0,"maximum":120},"pets":{"type":"array","items":{"type":"string","maxLength":10},"maxItems":3}},"required":["name","age"]}`

func genRequest(rng *rand.Rand, withJSON bool) *inferencev1.GenerateRequest {
	seed := rng.Uint64()
	r := &inferencev1.GenerateRequest{
		Prompt:   &inferencev1.GenerateRequest_Text{Text: promptText(rng)},
		Sampling: &inferencev1.SamplingParams{Temperature: []float32{0, 0.7, 1}[rng.IntN(3)], TopP: 0.95, Seed: &seed},
		Stopping: &inferencev1.StoppingCriteria{MaxTokens: int32(1 + rng.IntN(400)), IgnoreEos: rng.IntN(3) == 0},
	}
	if rng.IntN(4) == 0 {
		r.Stopping.Stop = []string{".", "\n"}[rng.IntN(2):]
	}
	if rng.IntN(5) == 0 {
		r.Logprobs = &inferencev1.LogprobOptions{Enabled: true, TopN: 3}
	}
	if withJSON {
		r.Stopping = &inferencev1.StoppingCriteria{MaxTokens: int32(40 + rng.IntN(200))}
		r.ResponseFormat = &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_JsonSchema{
			JsonSchema: &inferencev1.JsonSchema{Schema: personSchema, Name: "person"}}}
	}
	return r
}

// sendFailed is a Chat Send that failed: a Send that returns io.EOF means
// the server ended the stream, and its status is what Recv returns.
func sendFailed(st grpc.BidiStreamingClient[inferencev1.ChatRequest, inferencev1.ChatResponse], err error) result {
	if errors.Is(err, io.EOF) {
		for {
			if _, err = st.Recv(); err != nil {
				break
			}
		}
	}
	return badf("send_failed", "Chat Send: the stream ended with %v", err)
}

// grpcRefusal is what a gRPC status says: its code and its ErrorInfo
// (exactly one is the rule).
type grpcRefusal struct {
	code   codes.Code
	reason string
	infos  int
	domain string
}

func refusalOfErr(err error) grpcRefusal {
	st := status.Convert(err)
	r := grpcRefusal{code: st.Code()}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			r.infos++
			r.reason, r.domain = ei.GetReason(), ei.GetDomain()
		}
	}
	return r
}

func (r grpcRefusal) String() string { return r.code.String() + "/" + r.reason }

// clean: the server's own status with exactly one ErrorInfo of weft's
// domain, and not a failure of the server.
func (r grpcRefusal) clean() bool {
	return r.infos == 1 && r.domain == server.ErrorDomain && r.code != codes.Internal && r.code != codes.Unknown
}

// genOpts is how a Generate client reads its stream.
type genOpts struct {
	cancelAfter int           // cancel after this many chunks (-1: never)
	cancelDelay time.Duration // cancel this long after the call (0: never)
	slow        time.Duration // up to this long between two reads (random, with rng)
	rng         *rand.Rand
	stallAfter  int           // stop reading after this many chunks (0: never) ...
	stallFor    time.Duration // ... for this long,
	giveUp      bool          // then cancel instead of reading on
	json        bool          // the output must be JSON when it ends with EOS
}

// generate runs one Generate call and checks that it ends with exactly one
// Final (the last message) or one status.
func (s *soak) generate(ctx context.Context, req *inferencev1.GenerateRequest, o genOpts) result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cancelled bool
	var mu sync.Mutex
	cancelNow := func() {
		mu.Lock()
		cancelled = true
		mu.Unlock()
		cancel()
	}
	if o.cancelDelay > 0 {
		t := time.AfterFunc(o.cancelDelay, cancelNow)
		defer t.Stop()
	}
	if o.cancelAfter == 0 {
		cancelNow()
	}
	st, err := s.grpc.Generate(ctx, req)
	var (
		chunks, tokens int
		final          *inferencev1.Final
		text           strings.Builder
	)
	for err == nil {
		var m *inferencev1.GenerateResponse
		m, err = st.Recv()
		if err != nil {
			break
		}
		if final != nil {
			return badf("extra", "a message after the Final: %v", m)
		}
		if f := m.GetFinal(); f != nil {
			final = f
			continue
		}
		chunks++
		tokens += len(m.GetChunk().GetTokenIds())
		text.WriteString(m.GetChunk().GetText())
		switch {
		case chunks == o.cancelAfter:
			cancelNow()
		case chunks == o.stallAfter:
			time.Sleep(o.stallFor)
			if o.giveUp {
				cancelNow()
			}
		case o.slow > 0:
			time.Sleep(time.Duration(o.rng.Int64N(int64(o.slow) + 1)))
		}
	}
	mu.Lock()
	byUs := cancelled
	mu.Unlock()
	if errors.Is(err, io.EOF) {
		if final == nil {
			return result{outcome: "no_final", tokens: tokens, bad: "the stream ended without a Final"}
		}
		s.tally.addCached(int64(final.GetUsage().GetCachedTokens()))
		return checkFinal(final, tokens, text.String(), o.json)
	}
	r := refusalOfErr(err)
	switch {
	case r.code == codes.Canceled && byUs:
		return result{outcome: "cancelled", tokens: tokens}
	case r.code == codes.ResourceExhausted && r.reason == server.ReasonQueueFull && r.clean():
		return result{outcome: "status " + r.String(), tokens: tokens}
	}
	return result{outcome: "status " + r.String(), tokens: tokens, bad: fmt.Sprintf("unexpected status %v (%d ErrorInfo): %v", r, r.infos, err)}
}

// checkFinal checks a normal Final: not an error, its token count the
// chunks', and, for a JSON format that ended with EOS, valid JSON.
func checkFinal(f *inferencev1.Final, tokens int, text string, isJSON bool) result {
	reason := strings.TrimPrefix(f.GetFinishReason().String(), "FINISH_REASON_")
	res := result{outcome: "final " + strings.ToLower(reason), tokens: tokens}
	switch f.GetFinishReason() {
	case inferencev1.FinishReason_FINISH_REASON_EOS, inferencev1.FinishReason_FINISH_REASON_LENGTH, inferencev1.FinishReason_FINISH_REASON_STOP_SEQUENCE:
	default:
		res.bad = fmt.Sprintf("Final %s: %s", reason, f.GetErrorMessage())
		return res
	}
	if got := int(f.GetUsage().GetCompletionTokens()); got != tokens {
		res.bad = fmt.Sprintf("Final counts %d completion tokens, the chunks carried %d", got, tokens)
	}
	if isJSON && f.GetFinishReason() == inferencev1.FinishReason_FINISH_REASON_EOS && !json.Valid([]byte(text)) {
		res.bad = fmt.Sprintf("json_schema output ended with EOS but is not JSON: %q", text)
	}
	return res
}

// chat runs one Chat stream of 1-4 turns: a turn waits for its reply, is
// interrupted by the next turn, is cancelled with ChatCancel, is refused
// (no messages), or the client abandons the stream. Every turn sent must
// get exactly one Final or TurnError, in order, and nothing after it.
func (s *soak) chat(ctx context.Context, rng *rand.Rand) result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := s.grpc.Chat(ctx)
	if err != nil {
		r := refusalOfErr(err)
		return badf("status "+r.String(), "Chat: %v", err)
	}
	type plan struct {
		action string // wait, interrupt, cancel, bad, abandon
		after  int    // chunks before the action
		json   bool
	}
	turns := 1 + rng.IntN(4)
	plans := make([]plan, turns)
	for i := range plans {
		actions := []string{"wait", "wait", "interrupt", "cancel", "bad", "abandon"}
		a := actions[rng.IntN(len(actions))]
		if a == "interrupt" && i == turns-1 {
			a = "wait"
		}
		if a == "abandon" && rng.IntN(3) != 0 { // rarer: it ends the stream
			a = "wait"
		}
		plans[i] = plan{action: a, after: 1 + rng.IntN(20), json: rng.IntN(6) == 0}
	}
	sent := 0
	send := func() error {
		p := plans[sent]
		t := &inferencev1.ChatTurn{
			Stopping:   &inferencev1.StoppingCriteria{MaxTokens: int32(10 + rng.IntN(200))},
			Sampling:   &inferencev1.SamplingParams{Temperature: 0.8},
			Truncation: inferencev1.Truncation_TRUNCATION_DROP_OLDEST,
		}
		if p.action != "bad" {
			t.Messages = []*inferencev1.ChatMessage{{Role: inferencev1.Role_ROLE_USER, Content: chatLines[rng.IntN(len(chatLines))]}}
		}
		if p.json {
			t.ResponseFormat = &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_JsonSchema{
				JsonSchema: &inferencev1.JsonSchema{Schema: personSchema}}}
		}
		sent++
		return st.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: t}})
	}
	if err := send(); err != nil {
		return sendFailed(st, err)
	}
	terminals := map[int32]int{}
	chunks := map[int32]int{}
	turnTokens := map[int32]int{}
	texts := map[int32]*strings.Builder{}
	tokens := 0
	abandoned := false
	var bad []string
	for {
		m, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			r := refusalOfErr(err)
			if abandoned && r.code == codes.Canceled {
				return result{outcome: "abandoned", tokens: tokens, bad: strings.Join(bad, "; ")}
			}
			return result{outcome: "status " + r.String(), tokens: tokens, bad: fmt.Sprintf("Chat ended with %v: %v", r, err)}
		}
		idx := m.GetTurn()
		if int(idx) >= sent || idx < 0 {
			bad = append(bad, fmt.Sprintf("a message for turn %d, %d sent", idx, sent))
			continue
		}
		if terminals[idx] > 0 {
			bad = append(bad, fmt.Sprintf("a message for turn %d after its end", idx))
		}
		p := plans[idx]
		switch r := m.GetResponse().(type) {
		case *inferencev1.ChatResponse_Chunk:
			chunks[idx]++
			tokens += len(r.Chunk.GetTokenIds())
			turnTokens[idx] += len(r.Chunk.GetTokenIds())
			if texts[idx] == nil {
				texts[idx] = &strings.Builder{}
			}
			texts[idx].WriteString(r.Chunk.GetText())
			if chunks[idx] != p.after || int(idx) != sent-1 {
				continue
			}
			switch p.action {
			case "interrupt":
				if err := send(); err != nil {
					return sendFailed(st, err)
				}
			case "cancel":
				if err := st.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Cancel{Cancel: &inferencev1.ChatCancel{}}}); err != nil {
					return sendFailed(st, err)
				}
			case "abandon":
				abandoned = true
				cancel()
			}
			continue
		case *inferencev1.ChatResponse_Final:
			terminals[idx]++
			text := ""
			if texts[idx] != nil {
				text = texts[idx].String()
			}
			s.tally.addCached(int64(r.Final.GetUsage().GetCachedTokens()))
			tr := checkFinal(r.Final, turnTokens[idx], text, p.json)
			if f := r.Final.GetFinishReason(); f == inferencev1.FinishReason_FINISH_REASON_CANCELLED && (p.action == "cancel" || p.action == "interrupt") {
				tr.bad = ""
			}
			if tr.bad != "" {
				bad = append(bad, fmt.Sprintf("turn %d: %s", idx, tr.bad))
			}
			s.tally.record("grpc_chat_turn", tr.outcome, 0)
		case *inferencev1.ChatResponse_Error:
			terminals[idx]++
			e := r.Error
			outcome := "turn_error " + codes.Code(e.GetCode()).String() + "/" + e.GetReason()
			ok := e.GetDomain() == server.ErrorDomain &&
				(p.action == "bad" && codes.Code(e.GetCode()) == codes.InvalidArgument ||
					codes.Code(e.GetCode()) == codes.ResourceExhausted && e.GetReason() == server.ReasonQueueFull)
			if !ok {
				bad = append(bad, fmt.Sprintf("turn %d: TurnError %v", idx, e))
			}
			s.tally.record("grpc_chat_turn", outcome, 0)
		default:
			bad = append(bad, fmt.Sprintf("turn %d: an empty ChatResponse", idx))
			continue
		}
		// The turn ended: the next one, or the end of the stream (not on
		// a stream the client abandoned: its Recv ends with Canceled).
		if int(idx) == sent-1 && !abandoned {
			if sent < turns {
				if err := send(); err != nil {
					return sendFailed(st, err)
				}
			} else {
				st.CloseSend()
			}
		}
	}
	if abandoned {
		bad = append(bad, "the stream ended normally although the client cancelled it")
	}
	for i := range sent {
		if terminals[int32(i)] != 1 {
			bad = append(bad, fmt.Sprintf("turn %d of %d got %d terminal messages", i, sent, terminals[int32(i)]))
		}
	}
	return result{outcome: fmt.Sprintf("ended (%d turns)", sent), tokens: tokens, bad: strings.Join(bad, "; ")}
}

func (s *soak) grpcUnary(ctx context.Context, rng *rand.Rand) result {
	if rng.IntN(2) == 0 {
		r, err := s.grpc.Tokenize(ctx, &inferencev1.TokenizeRequest{Text: prompts[rng.IntN(len(prompts))], AddSpecialTokens: true})
		if err != nil || len(r.GetTokenIds()) == 0 {
			return badf("tokenize failed", "Tokenize: %v, %d ids", err, len(r.GetTokenIds()))
		}
		return result{outcome: "tokenize ok"}
	}
	r, err := s.grpc.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{})
	if err != nil || r.GetContextLength() == 0 {
		return badf("model_info failed", "GetModelInfo: %v", err)
	}
	return result{outcome: "model_info ok"}
}

// grpcBad sends an invalid request; it must be refused with a clean
// status (a client error with exactly one ErrorInfo).
func (s *soak) grpcBad(ctx context.Context, rng *rand.Rand) result {
	ok := func(p *inferencev1.GenerateRequest) *inferencev1.GenerateRequest {
		p.Prompt = &inferencev1.GenerateRequest_Text{Text: "Once upon a time"}
		if p.Stopping == nil {
			p.Stopping = &inferencev1.StoppingCriteria{MaxTokens: 8}
		}
		return p
	}
	ids := make([]int32, s.ctxLen+10)
	for i := range ids {
		ids[i] = 5
	}
	cases := []struct {
		name string
		req  *inferencev1.GenerateRequest
	}{
		{"negative temperature", ok(&inferencev1.GenerateRequest{Sampling: &inferencev1.SamplingParams{Temperature: -1}})},
		{"top_p 2", ok(&inferencev1.GenerateRequest{Sampling: &inferencev1.SamplingParams{TopP: 2}})},
		{"negative max_tokens", ok(&inferencev1.GenerateRequest{Stopping: &inferencev1.StoppingCriteria{MaxTokens: -3}})},
		{"empty prompt", &inferencev1.GenerateRequest{Prompt: &inferencev1.GenerateRequest_Text{Text: ""}}},
		{"token out of range", &inferencev1.GenerateRequest{Prompt: &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: []int32{1, 1 << 30}}}}},
		{"oversized text", &inferencev1.GenerateRequest{Prompt: &inferencev1.GenerateRequest_Text{Text: strings.Repeat("a dog ran. ", 4000)}}},
		{"prompt over the context", &inferencev1.GenerateRequest{Prompt: &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: ids}}}},
		{"bad schema", ok(&inferencev1.GenerateRequest{ResponseFormat: &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_JsonSchema{
			JsonSchema: &inferencev1.JsonSchema{Schema: `{"type": 5}`}}}})},
	}
	c := cases[rng.IntN(len(cases))]
	st, err := s.grpc.Generate(ctx, c.req)
	if err == nil {
		var m *inferencev1.GenerateResponse
		m, err = st.Recv()
		if err == nil {
			return badf("accepted", "%s: accepted (first message %v)", c.name, m)
		}
	}
	r := refusalOfErr(err)
	out := "status " + r.String()
	if !r.clean() || r.code == codes.OK || r.code == codes.ResourceExhausted && r.reason != server.ReasonPromptTooLong && r.reason != server.ReasonQueueFull {
		return badf(out, "%s: not a clean refusal: %v (%d ErrorInfo): %v", c.name, r, r.infos, err)
	}
	return result{outcome: out}
}

// grpcReset opens its own connection, starts a long stream and resets the
// TCP connection (SO_LINGER 0) after a few chunks.
func (s *soak) grpcReset(ctx context.Context, rng *rand.Rand) result {
	var mu sync.Mutex
	var raw []net.Conn
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			mu.Lock()
			raw = append(raw, c)
			mu.Unlock()
		}
		return c, err
	}
	conn, err := grpc.NewClient("passthrough:///"+s.srv.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dial))
	if err != nil {
		return badf("dial failed", "%v", err)
	}
	defer conn.Close()
	req := genRequest(rng, false)
	req.Stopping = &inferencev1.StoppingCriteria{MaxTokens: 400, IgnoreEos: true}
	st, err := inferencev1.NewInferenceServiceClient(conn).Generate(ctx, req)
	if err != nil {
		return badf("status", "Generate: %v", err)
	}
	after := 1 + rng.IntN(10)
	tokens := 0
	final := false
	for i := 0; i < after; i++ {
		m, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) && final {
				// Tokens coalesced into fewer chunks than planned.
				return result{outcome: "final before the reset", tokens: tokens}
			}
			r := refusalOfErr(err)
			if r.code == codes.ResourceExhausted && r.reason == server.ReasonQueueFull {
				return result{outcome: "status " + r.String(), tokens: tokens}
			}
			return result{outcome: "status " + r.String(), tokens: tokens, bad: fmt.Sprintf("before the reset: %v", err)}
		}
		tokens += len(m.GetChunk().GetTokenIds())
		final = final || m.GetFinal() != nil
	}
	mu.Lock()
	for _, c := range raw {
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}
	mu.Unlock()
	return result{outcome: "reset", tokens: tokens}
}

// completionBody is a /v1/completions request: one or two prompts, n 1-3.
func completionBody(rng *rand.Rand, stream bool) map[string]any {
	b := map[string]any{
		"model":       "llama",
		"max_tokens":  1 + rng.IntN(300),
		"temperature": []float64{0, 0.7, 1}[rng.IntN(3)],
		"seed":        rng.IntN(1 << 30),
		"n":           1 + rng.IntN(3),
		"stream":      stream,
	}
	if rng.IntN(3) == 0 {
		b["prompt"] = []string{promptText(rng), prompts[rng.IntN(len(prompts))]}
	} else {
		b["prompt"] = promptText(rng)
	}
	if rng.IntN(4) == 0 {
		b["stop"] = []string{"."}
	}
	if rng.IntN(5) == 0 {
		b["logprobs"] = 2
	}
	if stream {
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	return b
}

// chatBody is a /v1/chat/completions request, n 1-3, sometimes with a
// json_schema response_format (then isJSON).
func chatBody(rng *rand.Rand, stream bool) (b map[string]any, isJSON bool) {
	msgs := []map[string]any{{"role": "user", "content": chatLines[rng.IntN(len(chatLines))]}}
	switch rng.IntN(4) {
	case 0:
		msgs = append([]map[string]any{{"role": "system", "content": "You tell short stories."}}, msgs...)
	case 1:
		msgs = append([]map[string]any{{"role": "system", "content": longText(rng)}}, msgs...)
	}
	b = map[string]any{
		"model":       "llama",
		"messages":    msgs,
		"max_tokens":  1 + rng.IntN(300),
		"temperature": 0.8,
		"n":           1 + rng.IntN(3),
		"stream":      stream,
	}
	if stream {
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	if rng.IntN(4) == 0 {
		isJSON = true
		b["max_tokens"] = 40 + rng.IntN(200)
		b["response_format"] = map[string]any{"type": "json_schema",
			"json_schema": map[string]any{"name": "person", "schema": json.RawMessage(personSchema)}}
	}
	return b, isJSON
}

// post sends body (JSON of a value, or raw bytes) to path; a response
// counts as a request the server's handler saw.
func (s *soak) post(ctx context.Context, path string, body any) (*http.Response, error) {
	var raw []byte
	if b, ok := body.([]byte); ok {
		raw = b
	} else {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			panic(err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.srv.httpAddr+path, bytes.NewReader(raw))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err == nil {
		s.httpSent.Add(1)
	}
	return resp, err
}

// sseOpts is how an HTTP client reads its response.
type sseOpts struct {
	cancelAfter int // close the body after this many events (-1: never)
	slow        time.Duration
	rng         *rand.Rand
	stallAfter  int
	stallFor    time.Duration
	giveUp      bool
	json        bool // choices that end with "stop" must be JSON
	// tools is the tool choice of a request offering soakTools (auto,
	// none, required or named; "": no tools).
	tools string
}

// wireCall is a tool call or a streamed piece of one.
type wireCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// wireChoice is the part of a completion or chat choice the soak reads.
type wireChoice struct {
	Index        int     `json:"index"`
	Text         *string `json:"text"`
	FinishReason *string `json:"finish_reason"`
	Message      *struct {
		Content   *string    `json:"content"`
		ToolCalls []wireCall `json:"tool_calls"`
	} `json:"message"`
	Delta *struct {
		Content   *string    `json:"content"`
		ToolCalls []wireCall `json:"tool_calls"`
	} `json:"delta"`
}

// finishOK says whether an OpenAI finish_reason may end a choice of a
// request with tool choice tools ("" without tools).
func finishOK(reason, tools string) bool {
	switch reason {
	case "length":
		return true
	case "stop":
		return tools == "" || tools == "auto" || tools == "none"
	case "tool_calls":
		return tools != "" && tools != "none"
	}
	return false
}

// malformedCall says whether an error is the model's malformed tool call,
// a legitimate end of a request under tool choice auto (no grammar holds
// the model to the call syntax there).
func malformedCall(tools, msg string) bool {
	return tools == "auto" && strings.Contains(msg, "malformed tool call")
}

// checkWireCalls checks a choice that ended with tool_calls: one call or
// more, each naming an offered tool with JSON object arguments.
func checkWireCalls(calls []wireCall) []string {
	if len(calls) == 0 {
		return []string{"finish_reason tool_calls without calls"}
	}
	var bad []string
	for _, c := range calls {
		if msg := checkCall(c.Function.Name, c.Function.Arguments); msg != "" {
			bad = append(bad, msg)
		}
		if c.ID == "" {
			bad = append(bad, "a call without an id")
		}
	}
	return bad
}

type wireBody struct {
	Choices []wireChoice `json:"choices"`
	Usage   *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func (c wireChoice) content() string {
	switch {
	case c.Text != nil:
		return *c.Text
	case c.Message != nil && c.Message.Content != nil:
		return *c.Message.Content
	case c.Delta != nil && c.Delta.Content != nil:
		return *c.Delta.Content
	}
	return ""
}

// choicesWanted is how many choices an OpenAI request asks for.
func choicesWanted(body map[string]any) int {
	n := body["n"].(int)
	if p, ok := body["prompt"].([]string); ok {
		return n * len(p)
	}
	return n
}

// openAI sends an OpenAI request and checks its end: one finish_reason per
// choice (and, streaming, [DONE] last or one error event), or an error in
// OpenAI's shape with a 4xx status.
func (s *soak) openAI(ctx context.Context, path string, body map[string]any, o sseOpts) result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := s.post(ctx, path, body)
	if err != nil {
		return badf("transport error", "POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	want := choicesWanted(body)
	if resp.StatusCode == http.StatusInternalServerError && o.tools == "auto" {
		b, _ := io.ReadAll(resp.Body)
		var e wireBody
		if json.Unmarshal(b, &e) == nil && e.Error != nil && malformedCall(o.tools, e.Error.Message) {
			return result{outcome: "http 500 malformed call"}
		}
		return badf("http 500", "%s: status 500: %s", path, b)
	}
	if resp.StatusCode != http.StatusOK {
		r := httpRefusal(resp, false)
		if r.bad == "" && resp.StatusCode != http.StatusTooManyRequests {
			r.bad = fmt.Sprintf("%s: status %d for a valid request", path, resp.StatusCode)
		}
		return r
	}
	if !body["stream"].(bool) {
		var wb wireBody
		if err := json.NewDecoder(resp.Body).Decode(&wb); err != nil {
			return badf("bad body", "%s: decoding the response: %v", path, err)
		}
		seen := map[int]bool{}
		for _, c := range wb.Choices {
			if seen[c.Index] || c.Index < 0 || c.Index >= want {
				return badf("bad choices", "%s: choice index %d twice or out of [0, %d)", path, c.Index, want)
			}
			seen[c.Index] = true
			if c.FinishReason == nil || !finishOK(*c.FinishReason, o.tools) {
				return badf("bad finish", "%s: choice %d finish_reason %v (tool choice %q)", path, c.Index, c.FinishReason, o.tools)
			}
			if *c.FinishReason == "tool_calls" {
				if bad := checkWireCalls(c.Message.ToolCalls); len(bad) > 0 {
					return badf("bad calls", "%s: %s", path, strings.Join(bad, "; "))
				}
			}
			if o.json && *c.FinishReason == "stop" && !json.Valid([]byte(c.content())) {
				return badf("bad json", "%s: json_schema choice ended with stop but is not JSON: %q", path, c.content())
			}
		}
		if len(seen) != want || wb.Usage == nil {
			return badf("bad choices", "%s: %d choices of %d, usage %v", path, len(seen), want, wb.Usage)
		}
		out := "200 complete"
		if o.tools != "" {
			out = "200 " + o.tools + " " + *wb.Choices[0].FinishReason
		}
		return result{outcome: out, tokens: wb.Usage.CompletionTokens}
	}
	if o.cancelAfter == 0 {
		return result{outcome: "closed by client"}
	}
	finished := map[int]int{}
	finishes := map[string]int{}
	texts := map[int]*strings.Builder{}
	calls := map[int][]wireCall{} // by choice, rebuilt from the deltas
	tokens, events := 0, 0
	done := false
	var bad []string
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			if done {
				break
			}
			return result{outcome: "cut", tokens: tokens, bad: fmt.Sprintf("%s: the stream ended without [DONE] after %d events: %v", path, events, err)}
		}
		line = strings.TrimRight(line, "\r\n")
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		if done {
			bad = append(bad, "an event after [DONE]")
			break
		}
		data := strings.TrimPrefix(line, "data: ")
		events++
		if data == "[DONE]" {
			done = true
			continue
		}
		var wb wireBody
		if err := json.Unmarshal([]byte(data), &wb); err != nil {
			return result{outcome: "bad event", tokens: tokens, bad: fmt.Sprintf("%s: event %q: %v", path, data, err)}
		}
		if wb.Error != nil {
			// An error event ends the stream: nothing may follow it.
			rest, _ := io.ReadAll(rd)
			code := ""
			if wb.Error.Code != nil {
				code = *wb.Error.Code
			}
			r := result{outcome: "sse error " + code, tokens: tokens}
			if malformedCall(o.tools, wb.Error.Message) {
				r.outcome = "sse error malformed call"
			}
			if len(bytes.TrimSpace(rest)) > 0 || code != "rate_limit_exceeded" && !malformedCall(o.tools, wb.Error.Message) {
				r.bad = fmt.Sprintf("%s: error event %+v, then %q", path, *wb.Error, rest)
			}
			return r
		}
		if wb.Usage != nil {
			tokens += wb.Usage.CompletionTokens
		}
		for _, c := range wb.Choices {
			if finished[c.Index] > 0 {
				bad = append(bad, fmt.Sprintf("choice %d: an event after its finish", c.Index))
			}
			if texts[c.Index] == nil {
				texts[c.Index] = &strings.Builder{}
			}
			texts[c.Index].WriteString(c.content())
			if c.Delta != nil {
				for _, d := range c.Delta.ToolCalls {
					cs := calls[c.Index]
					switch {
					case d.Index == nil || *d.Index > len(cs):
						bad = append(bad, fmt.Sprintf("choice %d: a call delta of index %v after %d calls", c.Index, d.Index, len(cs)))
					case *d.Index == len(cs):
						calls[c.Index] = append(cs, d)
					default:
						cs[*d.Index].Function.Arguments += d.Function.Arguments
					}
				}
			}
			if c.FinishReason != nil {
				finished[c.Index]++
				finishes[*c.FinishReason]++
				if !finishOK(*c.FinishReason, o.tools) {
					bad = append(bad, fmt.Sprintf("choice %d: finish_reason %q (tool choice %q)", c.Index, *c.FinishReason, o.tools))
				}
				if *c.FinishReason == "tool_calls" {
					bad = append(bad, checkWireCalls(calls[c.Index])...)
				}
				if o.json && *c.FinishReason == "stop" && !json.Valid([]byte(texts[c.Index].String())) {
					bad = append(bad, fmt.Sprintf("choice %d: json_schema choice ended with stop but is not JSON: %q", c.Index, texts[c.Index].String()))
				}
			}
		}
		switch {
		case events == o.cancelAfter:
			cancel()
			resp.Body.Close()
			return result{outcome: "closed by client", tokens: tokens}
		case events == o.stallAfter:
			time.Sleep(o.stallFor)
			if o.giveUp {
				cancel()
				resp.Body.Close()
				return result{outcome: "stalled, gave up", tokens: tokens}
			}
		case o.slow > 0:
			time.Sleep(time.Duration(o.rng.Int64N(int64(o.slow) + 1)))
		}
	}
	for i := range want {
		if finished[i] != 1 {
			bad = append(bad, fmt.Sprintf("choice %d of %d finished %d times", i, want, finished[i]))
		}
	}
	out := "200 [DONE]"
	if o.tools != "" {
		for f := range finishes {
			out += " " + o.tools + " " + f
		}
	}
	return result{outcome: out, tokens: tokens, bad: strings.Join(bad, "; ")}
}

// httpRefusal checks a refused HTTP request: a 4xx (429 included) with
// the door's JSON error; anthropic's shape when anth.
func httpRefusal(resp *http.Response, anth bool) result {
	b, _ := io.ReadAll(resp.Body)
	out := fmt.Sprintf("http %d", resp.StatusCode)
	var shape struct {
		Type  string `json:"type"`
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &shape); err != nil || shape.Error == nil || shape.Error.Message == "" || shape.Error.Type == "" || anth && shape.Type != "error" {
		return badf(out, "status %d with a body not in the door's error shape: %q", resp.StatusCode, b)
	}
	if resp.StatusCode < 400 || resp.StatusCode >= 500 {
		return badf(out, "status %d: %s", resp.StatusCode, b)
	}
	return result{outcome: out}
}

// httpBad sends an invalid request; it must get a 4xx in the door's shape.
func (s *soak) httpBad(ctx context.Context, rng *rand.Rand) result {
	ids := make([]int, s.ctxLen+10)
	for i := range ids {
		ids[i] = 5
	}
	chat := func(extra map[string]any) map[string]any {
		b := map[string]any{"model": "llama", "messages": []map[string]any{{"role": "user", "content": "hi"}}, "max_tokens": 5}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	cases := []struct {
		name, path string
		body       any
		want       int
	}{
		{"invalid JSON", "/v1/completions", []byte(`{"model": "llama", "prompt": `), 400},
		{"temperature 1000", "/v1/completions", map[string]any{"model": "llama", "prompt": "x", "temperature": 1000}, 400},
		{"max_tokens 0", "/v1/chat/completions", chat(map[string]any{"max_tokens": 0}), 400},
		{"n 100", "/v1/chat/completions", chat(map[string]any{"n": 100}), 400},
		{"top_p 2", "/v1/chat/completions", chat(map[string]any{"top_p": 2}), 400},
		{"unknown model", "/v1/chat/completions", chat(map[string]any{"model": "no-such-model"}), 404},
		{"no messages", "/v1/chat/completions", chat(map[string]any{"messages": []any{}}), 400},
		{"oversized prompt", "/v1/completions", map[string]any{"model": "llama", "prompt": strings.Repeat("a dog ran. ", 4000)}, 400},
		{"prompt over the context", "/v1/completions", map[string]any{"model": "llama", "prompt": ids}, 400},
		{"bad schema", "/v1/chat/completions", chat(map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": map[string]any{"type": 5}}}}), 400},
		{"embeddings of other dimensions", "/v1/embeddings", map[string]any{"model": "llama", "input": "a dog", "dimensions": 7}, 400},
		{"embeddings of no input", "/v1/embeddings", map[string]any{"model": "llama", "input": []string{}}, 400},
		{"messages without max_tokens", "/v1/messages", map[string]any{"model": "llama", "messages": []map[string]any{{"role": "user", "content": "hi"}}}, 400},
	}
	c := cases[rng.IntN(len(cases))]
	resp, err := s.post(ctx, c.path, c.body)
	if err != nil {
		return badf("transport error", "%s: %v", c.name, err)
	}
	defer resp.Body.Close()
	r := httpRefusal(resp, c.path == "/v1/messages")
	if r.bad == "" && resp.StatusCode != c.want {
		r.bad = fmt.Sprintf("%s: status %d, want %d", c.name, resp.StatusCode, c.want)
	}
	return r
}

// messages sends an Anthropic Messages request, streaming or not; it must
// end with a stop_reason (and, streaming, message_stop last) or an error.
func (s *soak) messages(ctx context.Context, rng *rand.Rand) result {
	stream := rng.IntN(2) == 0
	body := map[string]any{
		"model":      "llama",
		"max_tokens": 1 + rng.IntN(250),
		"messages":   []map[string]any{{"role": "user", "content": chatLines[rng.IntN(len(chatLines))]}},
		"stream":     stream,
	}
	resp, err := s.post(ctx, "/v1/messages", body)
	if err != nil {
		return badf("transport error", "/v1/messages: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r := httpRefusal(resp, true)
		if r.bad == "" && resp.StatusCode != http.StatusTooManyRequests {
			r.bad = fmt.Sprintf("/v1/messages: status %d", resp.StatusCode)
		}
		return r
	}
	type ev struct {
		Type  string `json:"type"`
		Delta *struct {
			StopReason *string `json:"stop_reason"`
		} `json:"delta"`
		Usage *struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
		StopReason *string `json:"stop_reason"`
	}
	if !stream {
		var m ev
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m.StopReason == nil || m.Usage == nil {
			return badf("bad body", "/v1/messages: %v, stop_reason %v", err, m.StopReason)
		}
		return result{outcome: "200 " + *m.StopReason, tokens: m.Usage.OutputTokens}
	}
	rd := bufio.NewReader(resp.Body)
	stops, tokens := 0, 0
	stopped := false
	var bad []string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			break
		}
		data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: ")
		if !ok {
			continue
		}
		if stopped {
			bad = append(bad, "an event after message_stop")
		}
		var e ev
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			bad = append(bad, fmt.Sprintf("event %q: %v", data, err))
			continue
		}
		switch e.Type {
		case "message_delta":
			if e.Delta != nil && e.Delta.StopReason != nil {
				stops++
			}
			if e.Usage != nil {
				tokens = e.Usage.OutputTokens
			}
		case "message_stop":
			stopped = true
		case "error":
			return result{outcome: "sse error", tokens: tokens, bad: fmt.Sprintf("/v1/messages error event %q", data)}
		}
	}
	if !stopped || stops != 1 {
		bad = append(bad, fmt.Sprintf("stream ended with message_stop %v and %d stop reasons", stopped, stops))
	}
	return result{outcome: "200 message_stop", tokens: tokens, bad: strings.Join(bad, "; ")}
}

// httpReset writes a streaming chat request on a raw TCP connection, reads
// a few events and resets the connection (SO_LINGER 0).
func (s *soak) httpReset(ctx context.Context, rng *rand.Rand) result {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.srv.httpAddr)
	if err != nil {
		return badf("dial failed", "%v", err)
	}
	defer c.Close()
	body, _ := json.Marshal(map[string]any{"model": "llama", "stream": true, "max_tokens": 400, "ignore_eos": true,
		"messages": []map[string]any{{"role": "user", "content": chatLines[rng.IntN(len(chatLines))]}}})
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	c.SetReadDeadline(time.Now().Add(s.plan.requestLimit))
	rd := bufio.NewReader(c)
	statusLine, err := rd.ReadString('\n')
	if err != nil {
		return badf("no response", "raw POST: %v", err)
	}
	s.httpSent.Add(1)
	if !strings.Contains(statusLine, " 200 ") {
		if strings.Contains(statusLine, " 429 ") {
			return result{outcome: "http 429"}
		}
		return badf("status", "raw POST: %q", statusLine)
	}
	after := 1 + rng.IntN(10)
	for events := 0; events < after; {
		line, err := rd.ReadString('\n')
		if err != nil {
			return badf("cut", "raw POST: the stream ended after %d events: %v", events, err)
		}
		if strings.HasPrefix(line, "data: [DONE]") {
			// Tokens coalesced into fewer events than planned.
			return result{outcome: "[DONE] before the reset"}
		}
		if strings.HasPrefix(line, "data: ") {
			events++
		}
	}
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
	return result{outcome: "reset"}
}

// childKilled runs `weft chat` against the server and SIGKILLs it once
// its reply has started.
func (s *soak) childKilled(ctx context.Context, rng *rand.Rand) result {
	cmd := exec.CommandContext(ctx, s.bin, "chat", "--addr", s.srv.grpcAddr, "--max-tokens", "400", "--temperature", "0.8")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return badf("start failed", "%v", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return badf("start failed", "%v", err)
	}
	if err := cmd.Start(); err != nil {
		return badf("start failed", "%v", err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	fmt.Fprintln(stdin, chatLines[rng.IntN(len(chatLines))]) // stdin stays open: the chat goes on
	got := make(chan int, 1)
	go func() { // ends at the child's exit (stdout's EOF)
		buf := make([]byte, 256)
		n := 0
		for n < 24 {
			k, err := stdout.Read(buf)
			n += k
			if err != nil {
				break
			}
		}
		got <- n
		io.Copy(io.Discard, stdout)
	}()
	select {
	case n := <-got:
		if n < 24 {
			return badf("no reply", "weft chat wrote %d bytes and exited", n)
		}
	case <-time.After(60 * time.Second):
		return badf("no reply", "weft chat wrote no reply in 60 s")
	}
	cmd.Process.Kill()
	return result{outcome: "killed"}
}

// drain starts streams on both doors, sends SIGTERM once each has
// produced output, checks that new requests are refused, that every
// stream ends with its Final, and that the server exits with status 0
// within its drain timeout.
func (s *soak) drain() drainResult {
	s.dial()
	defer s.undial()
	var res drainResult
	type end struct {
		kind  string
		final bool
		err   string
	}
	ends := make(chan end, 16)
	started := make(chan struct{}, 16)
	const grpcStreams, httpStreams = 4, 3
	for i := range grpcStreams {
		go func() {
			seed := uint64(i)
			st, err := s.grpc.Generate(context.Background(), &inferencev1.GenerateRequest{
				Prompt:   &inferencev1.GenerateRequest_Text{Text: prompts[i%len(prompts)]},
				Sampling: &inferencev1.SamplingParams{Temperature: 0.8, Seed: &seed},
				Stopping: &inferencev1.StoppingCriteria{MaxTokens: 300, IgnoreEos: true},
			})
			if err != nil {
				started <- struct{}{}
				ends <- end{"grpc", false, err.Error()}
				return
			}
			first := true
			var final *inferencev1.Final
			for {
				m, err := st.Recv()
				if err != nil {
					if first {
						started <- struct{}{}
					}
					if errors.Is(err, io.EOF) && final != nil && final.GetFinishReason() == inferencev1.FinishReason_FINISH_REASON_LENGTH {
						ends <- end{"grpc", true, ""}
					} else {
						ends <- end{"grpc", false, fmt.Sprintf("err %v, final %v", err, final)}
					}
					return
				}
				if first {
					first = false
					started <- struct{}{}
				}
				if f := m.GetFinal(); f != nil {
					final = f
				}
			}
		}()
	}
	for range httpStreams {
		go func() {
			body := map[string]any{"model": "llama", "stream": true, "max_tokens": 300, "ignore_eos": true,
				"messages": []map[string]any{{"role": "user", "content": "Tell me a story."}}}
			resp, err := s.post(context.Background(), "/v1/chat/completions", body)
			if err != nil {
				started <- struct{}{}
				ends <- end{"http", false, err.Error()}
				return
			}
			defer resp.Body.Close()
			rd := bufio.NewReader(resp.Body)
			first, finish, done := true, "", false
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					break
				}
				if first && strings.HasPrefix(line, "data: ") {
					first = false
					started <- struct{}{}
				}
				if strings.HasPrefix(line, "data: [DONE]") {
					done = true
				}
				if i := strings.Index(line, `"finish_reason":"`); i >= 0 {
					finish = line[i+len(`"finish_reason":"`):]
					finish = finish[:strings.IndexByte(finish, '"')]
				}
			}
			if first {
				started <- struct{}{}
			}
			ends <- end{"http", done && finish == "length", fmt.Sprintf("status %d, finish %q, [DONE] %v", resp.StatusCode, finish, done)}
		}()
	}
	res.streams = grpcStreams + httpStreams
	timeout := time.After(2 * time.Minute)
	for range res.streams {
		select {
		case <-started:
		case <-timeout:
			s.violate("drain", "the drain's streams produced no output in 2 minutes")
			return res
		}
	}
	t0 := time.Now()
	if err := s.srv.sigterm(); err != nil {
		s.violate("drain", "SIGTERM: %v", err)
		return res
	}
	// New requests while draining: refused, on both doors.
	var refusals []string
	time.Sleep(50 * time.Millisecond) // the signal's delivery
	st, err := s.grpc.Generate(context.Background(), genRequest(rand.New(rand.NewPCG(1, 1)), false))
	if err == nil {
		_, err = st.Recv()
	}
	if r := refusalOfErr(err); r.code == codes.Unavailable {
		refusals = append(refusals, "gRPC "+r.String())
	} else {
		s.violate("drain", "a Generate after SIGTERM: %v", err)
	}
	resp, err := s.post(context.Background(), "/v1/completions", map[string]any{"model": "llama", "prompt": "x", "max_tokens": 3})
	switch {
	case err != nil:
		refusals = append(refusals, "HTTP connection refused")
	case resp.StatusCode == http.StatusServiceUnavailable:
		refusals = append(refusals, "HTTP 503")
		resp.Body.Close()
	default:
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.violate("drain", "a completion after SIGTERM: %d %s", resp.StatusCode, b)
	}
	res.refusals = strings.Join(refusals, ", ")
	for range res.streams {
		e := <-ends
		if e.final {
			res.finals++
		} else {
			s.violate("drain", "a %s stream in flight at SIGTERM did not end with its Final: %s", e.kind, e.err)
		}
	}
	select {
	case <-s.srv.exited:
	case <-time.After(soakDrainTimeout + 15*time.Second):
		s.violate("drain", "the server has not exited %v after SIGTERM", soakDrainTimeout+15*time.Second)
		s.srv.kill()
	}
	res.took = s.srv.exitAt.Sub(t0)
	res.exitCode = s.srv.cmd.ProcessState.ExitCode()
	if res.exitCode != 0 {
		s.violate("drain", "exit status %d (%v)", res.exitCode, s.srv.exitErr)
	}
	if res.took > soakDrainTimeout {
		s.violate("drain", "exit %v after SIGTERM, over --drain-timeout %v", res.took, soakDrainTimeout)
	}
	return res
}

// soakTools are the tools the tool kinds offer, with bounded arguments so
// that a call of stories260K ends within a few hundred tokens.
var soakTools = []*inferencev1.Tool{
	{Name: "get_weather", Description: "The weather in a city.", Parameters: `{"type":"object","properties":{"city":{"type":"string","maxLength":12},` +
		`"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}`},
	{Name: "get_time", Parameters: `{"type":"object","properties":{"zone":{"enum":["utc","local"]}},"required":["zone"]}`},
}

// checkCall checks one tool call: it names an offered tool and its
// arguments are a JSON object.
func checkCall(name, args string) string {
	known := false
	for _, t := range soakTools {
		known = known || t.GetName() == name
	}
	var obj map[string]any
	switch {
	case !known:
		return fmt.Sprintf("a call of %q, not an offered tool", name)
	case json.Unmarshal([]byte(args), &obj) != nil:
		return fmt.Sprintf("a call of %s with arguments %q, not a JSON object", name, args)
	}
	return ""
}

// toolReply is one tool turn's answer as the client saw it.
type toolReply struct {
	tokens int
	calls  []*inferencev1.ToolCall // rebuilt from the chunks' deltas
	final  *inferencev1.Final
	err    *inferencev1.TurnError
	bad    []string
}

// readToolReply reads turn's answer on st up to its Final or TurnError;
// after cancelAt chunks (when > 0) it sends a ChatCancel.
func readToolReply(st grpc.BidiStreamingClient[inferencev1.ChatRequest, inferencev1.ChatResponse], turn int32, cancelAt int) (toolReply, error) {
	var r toolReply
	chunks := 0
	for {
		m, err := st.Recv()
		if err != nil {
			return r, err
		}
		if m.GetTurn() != turn {
			r.bad = append(r.bad, fmt.Sprintf("a message for turn %d while turn %d runs", m.GetTurn(), turn))
		}
		if c := m.GetChunk(); c != nil {
			chunks++
			r.tokens += len(c.GetTokenIds())
			for _, d := range c.GetToolCalls() {
				if d.GetId() != "" {
					if int(d.GetIndex()) != len(r.calls) {
						r.bad = append(r.bad, fmt.Sprintf("a call delta of index %d opens call %d", d.GetIndex(), len(r.calls)))
						continue
					}
					r.calls = append(r.calls, &inferencev1.ToolCall{Id: d.GetId(), Name: d.GetName()})
				}
				if int(d.GetIndex()) >= len(r.calls) {
					r.bad = append(r.bad, fmt.Sprintf("arguments of call %d before its id", d.GetIndex()))
					continue
				}
				r.calls[d.GetIndex()].Arguments += d.GetArguments()
			}
			if chunks == cancelAt {
				if err := st.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Cancel{Cancel: &inferencev1.ChatCancel{}}}); err != nil {
					return r, err
				}
			}
			continue
		}
		if r.final = m.GetFinal(); r.final != nil {
			return r, nil
		}
		if r.err = m.GetError(); r.err != nil {
			return r, nil
		}
		r.bad = append(r.bad, "an empty ChatResponse")
	}
}

// check checks a tool turn's end given its tool choice: enforced (required
// or a named tool) ends with calls or at max_tokens; none never calls; auto
// may also end with a malformed call (FINISH_REASON_ERROR). A cancelled
// turn may end CANCELLED; a turn may be refused with QUEUE_FULL, and with
// PROMPT_TOO_LONG when mayBeLong (the conversation, tool definitions and
// calls included, outgrew the context: the client's to shorten).
func (r *toolReply) check(choice string, cancelled, mayBeLong bool) (outcome string) {
	if r.err != nil {
		outcome = "turn_error " + codes.Code(r.err.GetCode()).String() + "/" + r.err.GetReason()
		full := codes.Code(r.err.GetCode()) == codes.ResourceExhausted && r.err.GetReason() == server.ReasonQueueFull
		long := mayBeLong && codes.Code(r.err.GetCode()) == codes.InvalidArgument && r.err.GetReason() == server.ReasonPromptTooLong
		if !full && !long || r.err.GetDomain() != server.ErrorDomain {
			r.bad = append(r.bad, fmt.Sprintf("TurnError %v", r.err))
		}
		return outcome
	}
	f := r.final
	reason := f.GetFinishReason()
	outcome = "final " + strings.ToLower(strings.TrimPrefix(reason.String(), "FINISH_REASON_"))
	ok := false
	switch reason {
	case inferencev1.FinishReason_FINISH_REASON_LENGTH:
		ok = true
	case inferencev1.FinishReason_FINISH_REASON_CANCELLED:
		ok = cancelled
	case inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS:
		ok = choice != "none"
	case inferencev1.FinishReason_FINISH_REASON_EOS, inferencev1.FinishReason_FINISH_REASON_STOP_SEQUENCE:
		ok = choice == "none" || choice == "auto"
	case inferencev1.FinishReason_FINISH_REASON_ERROR:
		ok = choice == "auto" && strings.Contains(f.GetErrorMessage(), "malformed tool call")
	}
	if !ok {
		r.bad = append(r.bad, fmt.Sprintf("tool choice %s: Final %v (%s)", choice, reason, f.GetErrorMessage()))
	}
	if got := int(f.GetUsage().GetCompletionTokens()); got != r.tokens {
		r.bad = append(r.bad, fmt.Sprintf("Final counts %d completion tokens, the chunks carried %d", got, r.tokens))
	}
	// The Final lists the reply's complete calls: all that streamed when
	// it ended with them, those before the cut at max_tokens or a cancel,
	// none otherwise.
	fc := f.GetToolCalls()
	switch reason {
	case inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS:
		if len(fc) == 0 || len(fc) != len(r.calls) {
			r.bad = append(r.bad, fmt.Sprintf("TOOL_CALLS with %d calls in the Final, %d streamed", len(fc), len(r.calls)))
			return outcome
		}
	case inferencev1.FinishReason_FINISH_REASON_LENGTH, inferencev1.FinishReason_FINISH_REASON_CANCELLED:
		if len(fc) > len(r.calls) {
			r.bad = append(r.bad, fmt.Sprintf("Final %v with %d calls, %d streamed", reason, len(fc), len(r.calls)))
			return outcome
		}
	default:
		if len(fc) > 0 {
			r.bad = append(r.bad, fmt.Sprintf("Final %v with %d tool calls", reason, len(fc)))
			return outcome
		}
	}
	if choice == "none" && len(r.calls) > 0 {
		r.bad = append(r.bad, fmt.Sprintf("tool choice none, %d calls streamed", len(r.calls)))
	}
	for i, c := range fc {
		if s := r.calls[i]; s.GetId() != c.GetId() || s.GetName() != c.GetName() || s.GetArguments() != c.GetArguments() {
			r.bad = append(r.bad, fmt.Sprintf("call %d streamed as %v, the Final says %v", i, s, c))
		}
		if msg := checkCall(c.GetName(), c.GetArguments()); msg != "" {
			r.bad = append(r.bad, msg)
		}
		if c.GetId() == "" {
			r.bad = append(r.bad, fmt.Sprintf("call %d without an id", i))
		}
	}
	return outcome
}

// toolChoices are the gRPC tool choices the tool kinds pick from.
var toolChoices = []struct {
	name   string
	choice *inferencev1.ToolChoice
}{
	{"auto", nil},
	{"none", &inferencev1.ToolChoice{Choice: &inferencev1.ToolChoice_Mode{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE}}},
	{"required", &inferencev1.ToolChoice{Choice: &inferencev1.ToolChoice_Mode{Mode: inferencev1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED}}},
	{"named", &inferencev1.ToolChoice{Choice: &inferencev1.ToolChoice_Function{Function: "get_weather"}}},
}

// chatTools runs an agent loop on one Chat stream: turn 0 offers
// soakTools under a random tool choice (sometimes cancelled midway with
// ChatCancel); when it ends with calls, turn 1 sends each call's result
// (ROLE_TOOL, naming the call) with the same tools, whose prompt then
// starts from the prefix cache, and reads the answer.
func (s *soak) chatTools(ctx context.Context, rng *rand.Rand) result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := s.grpc.Chat(ctx)
	if err != nil {
		return badf("status "+refusalOfErr(err).String(), "Chat: %v", err)
	}
	tc := toolChoices[rng.IntN(len(toolChoices))]
	cancelAt := 0
	if rng.IntN(5) == 0 {
		cancelAt = 1 + rng.IntN(15)
	}
	seed := rng.Uint64()
	turn := &inferencev1.ChatTurn{
		Messages:          []*inferencev1.ChatMessage{{Role: inferencev1.Role_ROLE_USER, Content: "What is the weather in Paris? " + chatLines[rng.IntN(len(chatLines))]}},
		Tools:             soakTools,
		ToolChoice:        tc.choice,
		ParallelToolCalls: proto.Bool(rng.IntN(2) == 0),
		Sampling:          &inferencev1.SamplingParams{Temperature: 1, Seed: &seed},
		Stopping:          &inferencev1.StoppingCriteria{MaxTokens: int32(200 + rng.IntN(200))},
	}
	if err := st.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: turn}}); err != nil {
		return sendFailed(st, err)
	}
	first, err := readToolReply(st, 0, cancelAt)
	if err != nil {
		r := refusalOfErr(err)
		return result{outcome: "status " + r.String(), tokens: first.tokens, bad: fmt.Sprintf("Chat with tools ended with %v: %v", r, err)}
	}
	outcome := tc.name + " " + first.check(tc.name, cancelAt > 0, false)
	tokens := first.tokens
	bad := first.bad
	if first.final != nil {
		s.tally.addCached(int64(first.final.GetUsage().GetCachedTokens()))
	}
	if calls := first.final.GetToolCalls(); len(calls) > 0 && len(bad) == 0 {
		next := &inferencev1.ChatTurn{
			Tools:    soakTools,
			Sampling: &inferencev1.SamplingParams{Temperature: 1, Seed: &seed},
			Stopping: &inferencev1.StoppingCriteria{MaxTokens: int32(10 + rng.IntN(60))},
		}
		for _, c := range calls {
			next.Messages = append(next.Messages, &inferencev1.ChatMessage{Role: inferencev1.Role_ROLE_TOOL, ToolCallId: c.GetId(),
				Content: `{"temperature": 21, "sky": "clear"}`})
		}
		if err := st.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: next}}); err != nil {
			return sendFailed(st, err)
		}
		second, err := readToolReply(st, 1, 0)
		if err != nil {
			r := refusalOfErr(err)
			return result{outcome: "status " + r.String(), tokens: tokens, bad: fmt.Sprintf("Chat with tools, turn 1, ended with %v: %v", r, err)}
		}
		outcome += ", then " + second.check("auto", false, true)
		tokens += second.tokens
		bad = append(bad, second.bad...)
		if second.final != nil {
			s.tally.addCached(int64(second.final.GetUsage().GetCachedTokens()))
		}
	}
	if err := st.CloseSend(); err != nil {
		return sendFailed(st, err)
	}
	if m, err := st.Recv(); !errors.Is(err, io.EOF) {
		bad = append(bad, fmt.Sprintf("after the half-close: %v, %v", m, err))
	}
	return result{outcome: outcome, tokens: tokens, bad: strings.Join(bad, "; ")}
}

// chatToolsBody is a /v1/chat/completions request offering soakTools
// under a random tool choice (OpenAI's shapes), n 1; its choice's name.
func chatToolsBody(rng *rand.Rand) (map[string]any, string) {
	var tools []map[string]any
	for _, t := range soakTools {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name": t.GetName(), "description": t.GetDescription(), "parameters": json.RawMessage(t.GetParameters())}})
	}
	choices := []struct {
		name string
		wire any
	}{
		{"auto", "auto"},
		{"none", "none"},
		{"required", "required"},
		{"named", map[string]any{"type": "function", "function": map[string]any{"name": "get_time"}}},
	}
	c := choices[rng.IntN(len(choices))]
	stream := rng.IntN(2) == 0
	b := map[string]any{
		"model":               "llama",
		"messages":            []map[string]any{{"role": "user", "content": "What time is it? " + chatLines[rng.IntN(len(chatLines))]}},
		"tools":               tools,
		"tool_choice":         c.wire,
		"parallel_tool_calls": rng.IntN(2) == 0,
		"max_tokens":          200 + rng.IntN(200),
		"temperature":         1,
		"seed":                rng.IntN(1 << 30),
		"n":                   1,
		"stream":              stream,
	}
	if stream {
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	return b, c.name
}

// embedProbe is a text every embedding request carries among its inputs:
// its vector must match the one computed alone before the traffic within
// the README's tolerance (1e-4 per component, cosine >= 0.9999), whatever
// ran beside it.
const embedProbe = "The little dog ran to the park and found a big red ball."

// embedReference computes embedProbe's vector with nothing else running.
func (s *soak) embedReference() error {
	r, err := s.grpc.Embed(context.Background(), &inferencev1.EmbedRequest{
		Inputs: []*inferencev1.EmbedInput{{Input: &inferencev1.EmbedInput_Text{Text: embedProbe}}}})
	if err != nil {
		return err
	}
	if len(r.GetEmbeddings()) != 1 || len(r.GetEmbeddings()[0].GetValues()) != s.embedDim || s.embedDim == 0 {
		return fmt.Errorf("Embed of one input: %d vectors, want 1 of %d values", len(r.GetEmbeddings()), s.embedDim)
	}
	s.embedRef = r.GetEmbeddings()[0].GetValues()
	return nil
}

// checkVector checks one embedding: the model's width, unit norm, and for
// the probe the reference vector.
func (s *soak) checkVector(v []float32, probe bool) string {
	if len(v) != s.embedDim {
		return fmt.Sprintf("a vector of %d values, the model's width is %d", len(v), s.embedDim)
	}
	var norm, dot, refNorm, worst float64
	for i, x := range v {
		norm += float64(x) * float64(x)
		if probe {
			y := float64(s.embedRef[i])
			dot += float64(x) * y
			refNorm += y * y
			worst = max(worst, math.Abs(float64(x)-y))
		}
	}
	if math.Abs(math.Sqrt(norm)-1) > 1e-3 {
		return fmt.Sprintf("a vector of L2 norm %g, want 1", math.Sqrt(norm))
	}
	if probe {
		if cos := dot / math.Sqrt(norm*refNorm); worst > 1e-4 || cos < 0.9999 {
			return fmt.Sprintf("the probe's vector differs from its reference by up to %g per component, cosine %.7f", worst, cos)
		}
	}
	return ""
}

// embedInputs are 1 to 6 inputs, the probe among them: short and long
// texts and, when withIDs, one time in four token ids (OpenAI's input
// takes texts or token ids, not both); it returns where the probe is.
func embedInputs(rng *rand.Rand, withIDs bool) (texts []any, probeAt int) {
	n := 1 + rng.IntN(6)
	probeAt = rng.IntN(n)
	for i := range n {
		switch {
		case i == probeAt:
			texts = append(texts, embedProbe)
		case withIDs && rng.IntN(4) == 0:
			ids := make([]int32, 1+rng.IntN(60))
			for j := range ids {
				ids[j] = int32(3 + rng.IntN(500))
			}
			texts = append(texts, ids)
		default:
			texts = append(texts, promptText(rng))
		}
	}
	return texts, probeAt
}

// embed sends one gRPC Embed request: one vector per input, in order, of
// the model's width and unit norm, the probe's equal to its reference, the
// tokens counted; or QUEUE_FULL.
func (s *soak) embed(ctx context.Context, rng *rand.Rand) result {
	texts, probeAt := embedInputs(rng, true)
	req := &inferencev1.EmbedRequest{}
	for _, t := range texts {
		switch t := t.(type) {
		case string:
			req.Inputs = append(req.Inputs, &inferencev1.EmbedInput{Input: &inferencev1.EmbedInput_Text{Text: t}})
		case []int32:
			req.Inputs = append(req.Inputs, &inferencev1.EmbedInput{Input: &inferencev1.EmbedInput_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: t}}})
		}
	}
	r, err := s.grpc.Embed(ctx, req)
	if err != nil {
		ref := refusalOfErr(err)
		res := result{outcome: "status " + ref.String()}
		if ref.code != codes.ResourceExhausted || ref.reason != server.ReasonQueueFull || !ref.clean() {
			res.bad = fmt.Sprintf("Embed: %v", err)
		}
		return res
	}
	var bad []string
	if len(r.GetEmbeddings()) != len(texts) {
		return badf("bad response", "Embed of %d inputs: %d vectors", len(texts), len(r.GetEmbeddings()))
	}
	sum := 0
	for i, e := range r.GetEmbeddings() {
		sum += int(e.GetPromptTokens())
		if msg := s.checkVector(e.GetValues(), i == probeAt); msg != "" {
			bad = append(bad, fmt.Sprintf("input %d: %s", i, msg))
		}
	}
	if sum != int(r.GetPromptTokens()) || sum == 0 {
		bad = append(bad, fmt.Sprintf("prompt_tokens %d, the inputs' add up to %d", r.GetPromptTokens(), sum))
	}
	return result{outcome: "ok", bad: strings.Join(bad, "; ")}
}

// embeddings sends one POST /v1/embeddings (float or base64 encoding) and
// checks it as embed does; or a 429.
func (s *soak) embeddings(ctx context.Context, rng *rand.Rand) result {
	texts, probeAt := embedInputs(rng, false)
	format := []string{"float", "base64"}[rng.IntN(2)]
	resp, err := s.post(ctx, "/v1/embeddings", map[string]any{"model": "llama", "input": texts, "encoding_format": format})
	if err != nil {
		return badf("transport error", "/v1/embeddings: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r := httpRefusal(resp, false)
		if r.bad == "" && resp.StatusCode != http.StatusTooManyRequests {
			r.bad = fmt.Sprintf("/v1/embeddings: status %d for a valid request", resp.StatusCode)
		}
		return r
	}
	var body struct {
		Data []struct {
			Index     int             `json:"index"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Usage *struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Usage == nil || body.Usage.PromptTokens == 0 {
		return badf("bad body", "/v1/embeddings: %v, usage %v", err, body.Usage)
	}
	if len(body.Data) != len(texts) {
		return badf("bad body", "/v1/embeddings of %d inputs: %d vectors", len(texts), len(body.Data))
	}
	var bad []string
	for i, d := range body.Data {
		var v []float32
		if format == "float" {
			err = json.Unmarshal(d.Embedding, &v)
		} else {
			var b64 string
			var raw []byte
			if err = json.Unmarshal(d.Embedding, &b64); err == nil {
				raw, err = base64.StdEncoding.DecodeString(b64)
			}
			for j := 0; err == nil && j+4 <= len(raw); j += 4 {
				v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
			}
		}
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("data[%d] (%s): %v", i, format, err))
		case d.Index != i:
			bad = append(bad, fmt.Sprintf("data[%d] has index %d", i, d.Index))
		default:
			if msg := s.checkVector(v, i == probeAt); msg != "" {
				bad = append(bad, fmt.Sprintf("data[%d] (%s): %s", i, format, msg))
			}
		}
	}
	return result{outcome: "200 " + format, bad: strings.Join(bad, "; ")}
}
