package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Client is the part of the generated InferenceServiceClient the load
// generator uses; inferencev1.NewInferenceServiceClient(conn) satisfies it.
type Client interface {
	Generate(ctx context.Context, in *inferencev1.GenerateRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[inferencev1.GenerateResponse], error)
	Tokenize(ctx context.Context, in *inferencev1.TokenizeRequest, opts ...grpc.CallOption) (*inferencev1.TokenizeResponse, error)
	Detokenize(ctx context.Context, in *inferencev1.DetokenizeRequest, opts ...grpc.CallOption) (*inferencev1.DetokenizeResponse, error)
	GetModelInfo(ctx context.Context, in *inferencev1.GetModelInfoRequest, opts ...grpc.CallOption) (*inferencev1.GetModelInfoResponse, error)
}

var _ Client = inferencev1.InferenceServiceClient(nil)

// ChatClient is a Client that also opens Chat streams (Config.ChatTurn);
// the generated InferenceServiceClient is one.
type ChatClient interface {
	Client
	Chat(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[inferencev1.ChatRequest, inferencev1.ChatResponse], error)
}

var _ ChatClient = inferencev1.InferenceServiceClient(nil)

// Config describes one benchmark run.
type Config struct {
	// Concurrency is the number of closed-loop clients, each sending its next
	// request when the previous one ends. With Rate > 0 it caps the requests
	// in flight instead (0: no cap).
	Concurrency int
	// Rate, when > 0, makes the run open-loop: requests arrive at this many
	// per second whatever the server's state, gaps drawn by Arrivals.
	Rate float64
	// Burstiness is the gamma shape of the arrival gaps (1 = Poisson, the
	// default).
	Burstiness float64
	// Requests is the number of measured requests. Exactly one of Requests
	// and Duration is set.
	Requests int
	// Duration, when set, sends requests for this long; requests in flight
	// when it ends are waited for and counted.
	Duration time.Duration
	// Warmup requests run first (with the same concurrency, closed-loop) and
	// are not counted; any failure among them fails the run.
	Warmup int
	// Seed makes the workload and the arrivals repeatable.
	Seed uint64
	// PromptLen and OutputLen draw each request's lengths. OutputLen is sent
	// as max_tokens.
	PromptLen, OutputLen LengthDist
	// IgnoreEOS asks the server to generate exactly OutputLen tokens; a
	// request that returns another count then counts as failed.
	IgnoreEOS bool
	// ResponseFormat, when set, is sent on every request (structured
	// output). A constrained output ends when its automaton accepts, so
	// its length cannot be forced: IgnoreEOS must be off, OutputLen is
	// only the max_tokens cap, and a request counts as completed on a
	// finish reason of EOS, stop or length, its tokens counted from the
	// final usage. gRPC only.
	ResponseFormat *inferencev1.ResponseFormat
	// ChatTurn, when set, sends each request as the one turn of its own
	// Chat stream: a copy of ChatTurn (tools, tool choice, sampling...)
	// with the prompt as its user message and the request's max_tokens
	// and ignore_eos. Prompts are text (TextPrompts is implied). A turn
	// that calls tools ends when its calls are complete (as a response
	// format's outputs do: IgnoreEOS must be off). The client must be a
	// ChatClient.
	ChatTurn *inferencev1.ChatTurn
	// SLO, when set, adds goodput to the result.
	SLO SLO
	// Describe names the workload in the result (defaults to the lengths).
	Describe string
	// Progress, when not nil, receives a progress bar redrawn in place.
	Progress io.Writer
	// TextPrompts sends prompts as text (words of PromptWords, PromptLen
	// of them) instead of token ids: the prompts RunOpenAI sends, so a
	// gRPC run and an OpenAI run of one server do the same work.
	TextPrompts bool
	// PromptCopy makes a prompt-copy workload, whose outputs repeat long
	// spans of their prompts: before the run (untimed, one at a time) each
	// request's drawn prompt Q is sent alone for the server's own greedy
	// continuation G of OutputLen tokens; the request then sends Q G Q.
	// A model that repeats its context continues with G again, and prompt
	// lookup (n-gram speculation) drafts exactly that continuation; how
	// much of G the model really repeats is what the server's acceptance
	// counts say. Needs Requests (not Duration); not with a response
	// format or a chat turn.
	PromptCopy bool
}

func (c *Config) validate() error {
	if c.Burstiness == 0 {
		c.Burstiness = 1
	}
	switch {
	case (c.Requests > 0) == (c.Duration > 0):
		return errors.New("bench: set exactly one of requests and duration")
	case c.Requests < 0 || c.Duration < 0 || c.Warmup < 0 || c.Concurrency < 0:
		return errors.New("bench: requests, duration, warmup and concurrency must not be negative")
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("bench: rate %v must be a positive number (or 0 for closed loop)", c.Rate)
	case c.Rate == 0 && c.Concurrency == 0:
		return errors.New("bench: set a concurrency (closed loop) or a rate (open loop)")
	case c.Burstiness < 0:
		return errors.New("bench: burstiness must be positive")
	case c.PromptLen == nil || c.OutputLen == nil:
		return errors.New("bench: prompt and output lengths are required")
	case c.ResponseFormat != nil && c.IgnoreEOS:
		return errors.New("bench: a response format ends outputs when it accepts: turn ignore_eos off")
	case c.ChatTurn != nil && c.ResponseFormat != nil:
		return errors.New("bench: a chat turn carries its own response format")
	case c.PromptCopy && (c.Duration > 0 || c.ChatTurn != nil || c.ResponseFormat != nil):
		return errors.New("bench: a prompt-copy workload needs a request count, and no response format or chat turn")
	}
	if c.Describe == "" {
		c.Describe = fmt.Sprintf("prompt %s, output %s", c.PromptLen, c.OutputLen)
	}
	return nil
}

// Err reports a run with failed requests as an error.
func (r *Result) Err() error {
	if r.Failed == 0 {
		return nil
	}
	first := ""
	if len(r.Errors) > 0 {
		first = ": " + r.Errors[0]
	}
	return fmt.Errorf("%d of %d requests failed%s", r.Failed, r.Requests, first)
}

// Run benchmarks the server behind c. The returned error is for a run that
// could not be carried out (the model info or the vocabulary could not be
// read, a warm-up request failed, ctx ended); failed measured requests are
// counted in Result.Failed, which Result.Err turns into an error.
func Run(ctx context.Context, c Client, cfg Config) (Result, error) {
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	info, err := c.GetModelInfo(ctx, &inferencev1.GetModelInfoRequest{})
	if err != nil {
		return Result{}, fmt.Errorf("bench: GetModelInfo: %w", err)
	}
	vocab, err := PromptVocab(ctx, c, info, cfg.Seed)
	if err != nil {
		return Result{}, err
	}
	w := &Workload{
		Seed: cfg.Seed, PromptLen: cfg.PromptLen, OutputLen: cfg.OutputLen,
		Vocab: vocab, BOS: info.GetBosTokenId(), MaxTotal: int(info.GetContextLength()),
	}
	send := func(ctx context.Context, s Spec, t0 time.Time) Record { return send(ctx, c, &cfg, s, t0) }
	if cfg.ChatTurn != nil {
		cc, ok := c.(ChatClient)
		if !ok {
			return Result{}, errors.New("bench: a chat turn needs a client with Chat")
		}
		cfg.TextPrompts = true
		send = func(ctx context.Context, s Spec, t0 time.Time) Record { return sendChat(ctx, cc, &cfg, s, t0) }
	}
	if cfg.TextPrompts {
		w.Vocab, w.Words = nil, PromptWords
	}
	res, err := runLoad(ctx, &cfg, w, send, func(ctx context.Context, s Spec) (Continuation, error) {
		return continueGRPC(ctx, c, &cfg, s)
	})
	res.Model = info.GetName()
	if cfg.ResponseFormat != nil {
		if b, err := protojson.Marshal(cfg.ResponseFormat); err == nil {
			res.ResponseFormat = string(b)
		} else {
			res.ResponseFormat = cfg.ResponseFormat.String()
		}
	}
	return res, err
}

// sendFunc sends one request and records it, timed from t0 (the run's
// start).
type sendFunc func(ctx context.Context, s Spec, t0 time.Time) Record

// continueFunc returns the server's greedy continuation of s's prompt,
// s.OutputLen tokens long (Config.PromptCopy).
type continueFunc func(ctx context.Context, s Spec) (Continuation, error)

// runLoad runs the warm-up and the measured load of cfg over w with send,
// whatever the protocol; with cfg.PromptCopy it first asks cont for the
// continuations of the warm-up's and the run's seed prompts.
func runLoad(ctx context.Context, cfg *Config, w *Workload, send sendFunc, cont continueFunc) (Result, error) {
	w.Copy = cfg.PromptCopy
	if err := w.validate(); err != nil {
		return Result{}, fmt.Errorf("bench: %w", err)
	}
	if w.Copy {
		w.Continuations = make(map[int]Continuation, cfg.Warmup+cfg.Requests)
		for i := -cfg.Warmup; i < cfg.Requests; i++ {
			g, err := cont(ctx, w.Request(i))
			if err != nil {
				return Result{}, fmt.Errorf("bench: prompt copy: continuation of request %d: %w", i, err)
			}
			w.Continuations[i] = g
		}
	}
	if cfg.Warmup > 0 {
		recs := closedLoop(ctx, send, w, -cfg.Warmup, 0, 0, max(1, cfg.Concurrency), nil)
		for _, r := range recs {
			if r.Err != nil {
				return Result{}, fmt.Errorf("bench: warm-up request failed: %w", r.Err)
			}
		}
	}
	var prog *progress
	if cfg.Progress != nil {
		prog = startProgress(cfg.Progress, cfg.Requests, cfg.Duration)
	}
	var recs []Record
	var err error
	if cfg.Rate > 0 {
		recs, err = openLoop(ctx, send, cfg, w, prog)
		if err != nil {
			prog.stop()
			return Result{}, err
		}
	} else {
		recs = closedLoop(ctx, send, w, 0, cfg.Requests, cfg.Duration, cfg.Concurrency, prog)
	}
	prog.stop()
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("bench: interrupted: %w", err)
	}
	slices.SortFunc(recs, func(a, b Record) int { return a.Index - b.Index })
	_, isCycle := cfg.OutputLen.(Cycle)
	res := NewResult(recs, span(recs), cfg.SLO, isCycle)
	res.Seed = cfg.Seed
	res.Warmup = cfg.Warmup
	res.Workload = cfg.Describe
	if cfg.Rate > 0 {
		res.Mode = fmt.Sprintf("open loop, %g req/s, burstiness %g", cfg.Rate, cfg.Burstiness)
		if cfg.Concurrency > 0 {
			res.Mode += fmt.Sprintf(", at most %d in flight", cfg.Concurrency)
		}
	} else {
		res.Mode = fmt.Sprintf("closed loop, concurrency %d", cfg.Concurrency)
	}
	return res, nil
}

// span is the time from the first request sent to the last final message.
func span(recs []Record) time.Duration {
	if len(recs) == 0 {
		return 0
	}
	first, last := time.Duration(math.MaxInt64), time.Duration(0)
	for _, r := range recs {
		first = min(first, r.Sent)
		last = max(last, r.Sent+r.End)
	}
	return last - first
}

// closedLoop runs `workers` clients that send requests from index `from`
// until `n` requests were sent (n > 0) or `d` has passed (d > 0); with both
// zero it sends indexes from..-1 (the warm-up).
func closedLoop(ctx context.Context, send sendFunc, w *Workload, from, n int, d time.Duration, workers int, prog *progress) []Record {
	var (
		mu   sync.Mutex
		recs []Record
		next atomic.Int64
		wg   sync.WaitGroup
	)
	next.Store(int64(from))
	start := time.Now()
	end := 0
	if n > 0 {
		end = from + n
	}
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if d > 0 && time.Since(start) >= d {
					return
				}
				i := int(next.Add(1) - 1)
				if d == 0 && i >= end {
					return
				}
				r := send(ctx, w.Request(i), start)
				prog.done(r.Err != nil)
				mu.Lock()
				recs = append(recs, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return recs
}

// openLoop sends requests at the arrival process's times, each on its own
// goroutine, at most cfg.Concurrency in flight when that is set.
func openLoop(ctx context.Context, send sendFunc, cfg *Config, w *Workload, prog *progress) ([]Record, error) {
	arr, err := NewArrivals(cfg.Rate, cfg.Burstiness, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var (
		mu   sync.Mutex
		recs []Record
		wg   sync.WaitGroup
		sem  chan struct{}
	)
	if cfg.Concurrency > 0 {
		sem = make(chan struct{}, cfg.Concurrency)
	}
	start := time.Now()
	at := time.Duration(0) // scheduled send time of request i
	timer := time.NewTimer(0)
	defer timer.Stop()
loop:
	for i := 0; cfg.Requests == 0 || i < cfg.Requests; i++ {
		if i > 0 {
			at += arr.Next()
		}
		if cfg.Duration > 0 && at >= cfg.Duration {
			break
		}
		timer.Reset(time.Until(start.Add(at)))
		select {
		case <-ctx.Done():
			break loop
		case <-timer.C:
		}
		if sem != nil {
			select {
			case <-ctx.Done():
				break loop
			case sem <- struct{}{}:
			}
		}
		spec := w.Request(i)
		wg.Go(func() {
			r := send(ctx, spec, start)
			if sem != nil {
				<-sem
			}
			prog.done(r.Err != nil)
			mu.Lock()
			recs = append(recs, r)
			mu.Unlock()
		})
	}
	wg.Wait()
	return recs, nil
}

// send sends one request and records its stream. Any RPC error, a final
// message reporting an error, or a stream that disagrees with itself or
// with the request (ignore_eos with another token count) fails the record.
func send(ctx context.Context, c Client, cfg *Config, s Spec, t0 time.Time) Record {
	r := Record{Index: s.Index, PromptTokens: len(s.Prompt), OutputLen: s.OutputLen}
	req := &inferencev1.GenerateRequest{
		RequestId: fmt.Sprintf("bench-%d", s.Index),
		Prompt:    &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: s.Prompt}},
		Stopping: &inferencev1.StoppingCriteria{
			MaxTokens: int32(s.OutputLen),
			IgnoreEos: cfg.IgnoreEOS,
		},
		ResponseFormat: cfg.ResponseFormat,
	}
	if s.Prompt == nil {
		req.Prompt = &inferencev1.GenerateRequest_Text{Text: s.Text}
	}
	sent := time.Now()
	r.Sent = sent.Sub(t0)
	var p peer.Peer // the server that took the request, once known
	target := func() {
		if p.Addr != nil {
			r.Target = p.Addr.String()
		}
	}
	fail := func(err error) Record {
		r.End = time.Since(sent)
		r.Err = fmt.Errorf("request %d: %w", s.Index, err)
		target()
		return r
	}
	stream, err := c.Generate(ctx, req, grpc.Peer(&p))
	if err != nil {
		return fail(err)
	}
	return record(r, sent, cfg, s, &p, func() (*inferencev1.Chunk, *inferencev1.Final, error) {
		msg, err := stream.Recv()
		if err != nil {
			return nil, nil, err
		}
		if msg.GetChunk() == nil && msg.GetFinal() == nil {
			return nil, nil, errors.New("empty response message")
		}
		return msg.GetChunk(), msg.GetFinal(), nil
	})
}

// continueGRPC generates s's continuation (greedy, s.OutputLen tokens,
// ignore_eos as cfg says) and returns its token ids and text.
func continueGRPC(ctx context.Context, c Client, cfg *Config, s Spec) (Continuation, error) {
	req := &inferencev1.GenerateRequest{
		RequestId: fmt.Sprintf("bench-copy-%d", s.Index),
		Prompt:    &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: s.Prompt}},
		Stopping:  &inferencev1.StoppingCriteria{MaxTokens: int32(s.OutputLen), IgnoreEos: cfg.IgnoreEOS},
	}
	if s.Prompt == nil {
		req.Prompt = &inferencev1.GenerateRequest_Text{Text: s.Text}
	}
	stream, err := c.Generate(ctx, req)
	if err != nil {
		return Continuation{}, err
	}
	var g Continuation
	var text strings.Builder
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			return Continuation{}, errors.New("stream ended without a final message")
		}
		if err != nil {
			return Continuation{}, err
		}
		if ch := msg.GetChunk(); ch != nil {
			g.Tokens = append(g.Tokens, ch.GetTokenIds()...)
			text.WriteString(ch.GetText())
			continue
		}
		if f := msg.GetFinal(); f != nil {
			if r := f.GetFinishReason(); r != inferencev1.FinishReason_FINISH_REASON_LENGTH && r != inferencev1.FinishReason_FINISH_REASON_EOS {
				return Continuation{}, fmt.Errorf("finished with %v: %s", r, f.GetErrorMessage())
			}
			if len(g.Tokens) == 0 {
				return Continuation{}, errors.New("empty continuation")
			}
			g.Text = text.String()
			return g, nil
		}
	}
}

// sendChat sends one request as the one turn of a Chat stream
// (Config.ChatTurn) and records it as send does.
func sendChat(ctx context.Context, c ChatClient, cfg *Config, s Spec, t0 time.Time) Record {
	r := Record{Index: s.Index, PromptTokens: len(s.Prompt), OutputLen: s.OutputLen}
	turn := proto.CloneOf(cfg.ChatTurn)
	turn.RequestId = fmt.Sprintf("bench-%d", s.Index)
	turn.Messages = []*inferencev1.ChatMessage{{Role: inferencev1.Role_ROLE_USER, Content: s.Text}}
	turn.Stopping = &inferencev1.StoppingCriteria{MaxTokens: int32(s.OutputLen), IgnoreEos: cfg.IgnoreEOS}
	sent := time.Now()
	r.Sent = sent.Sub(t0)
	var p peer.Peer
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Chat(ctx, grpc.Peer(&p))
	if err == nil {
		err = stream.Send(&inferencev1.ChatRequest{Request: &inferencev1.ChatRequest_Turn{Turn: turn}})
	}
	if err == nil {
		err = stream.CloseSend()
	}
	if err != nil {
		r.End = time.Since(sent)
		r.Err = fmt.Errorf("request %d: %w", s.Index, err)
		return r
	}
	return record(r, sent, cfg, s, &p, func() (*inferencev1.Chunk, *inferencev1.Final, error) {
		msg, err := stream.Recv()
		if err != nil {
			return nil, nil, err
		}
		if te := msg.GetError(); te != nil {
			return nil, nil, fmt.Errorf("turn refused: %s (%s)", te.GetMessage(), te.GetReason())
		}
		if msg.GetChunk() == nil && msg.GetFinal() == nil {
			return nil, nil, errors.New("empty response message")
		}
		return msg.GetChunk(), msg.GetFinal(), nil
	})
}

// record reads one request's stream with recv (a chunk or the final
// message, io.EOF at its end) into r, the request sent at sent. Any
// error, a final message reporting an error, or a stream that disagrees
// with itself or with the request fails the record.
func record(r Record, sent time.Time, cfg *Config, s Spec, p *peer.Peer, recv func() (*inferencev1.Chunk, *inferencev1.Final, error)) Record {
	target := func() {
		if p.Addr != nil {
			r.Target = p.Addr.String()
		}
	}
	fail := func(err error) Record {
		r.End = time.Since(sent)
		r.Err = fmt.Errorf("request %d: %w", s.Index, err)
		target()
		return r
	}
	var final *inferencev1.Final
	tokens := 0
	for {
		chunk, fin, err := recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
		switch {
		case final != nil:
			return fail(errors.New("message after the final message"))
		case chunk != nil:
			n := len(chunk.GetTokenIds())
			if n == 0 {
				return fail(errors.New("chunk without tokens"))
			}
			tokens += n
			r.Chunks = append(r.Chunks, ChunkTime{At: time.Since(sent), Tokens: n})
		case fin != nil:
			final = fin
			r.End = time.Since(sent)
		}
	}
	if final == nil {
		return fail(errors.New("stream ended without a final message"))
	}
	r.OutputTokens = int(final.GetUsage().GetCompletionTokens())
	r.PromptTokens = int(final.GetUsage().GetPromptTokens())
	r.QueueWait = final.GetTimings().GetQueueWait().AsDuration()
	r.DraftTokens = int(final.GetTimings().GetDraftTokens())
	r.AcceptedDraftTokens = int(final.GetTimings().GetAcceptedDraftTokens())
	r.Finish = finishName(final.GetFinishReason())
	switch reason := final.GetFinishReason(); reason {
	case inferencev1.FinishReason_FINISH_REASON_EOS, inferencev1.FinishReason_FINISH_REASON_LENGTH,
		inferencev1.FinishReason_FINISH_REASON_STOP_SEQUENCE, inferencev1.FinishReason_FINISH_REASON_TOOL_CALLS:
	default:
		return fail(fmt.Errorf("finished with %v: %s", reason, final.GetErrorMessage()))
	}
	if tokens != r.OutputTokens {
		return fail(fmt.Errorf("streamed %d tokens but the final message counts %d", tokens, r.OutputTokens))
	}
	if cfg.IgnoreEOS && r.OutputTokens != s.OutputLen {
		return fail(fmt.Errorf("got %d tokens with ignore_eos, want %d (finish %v)",
			r.OutputTokens, s.OutputLen, final.GetFinishReason()))
	}
	target()
	return r
}

// finishName is a finish reason as Result.FinishReasons keys it: the enum
// name without its prefix, lower case ("eos", "length", "stop_sequence").
func finishName(f inferencev1.FinishReason) string {
	return strings.ToLower(strings.TrimPrefix(f.String(), "FINISH_REASON_"))
}

// maxVocabProbe caps how many token ids PromptVocab checks.
const maxVocabProbe = 2048

// PromptVocab finds token ids that make plain prompts: ids that are not BOS
// or end-of-generation, whose text (Detokenize) is non-empty valid UTF-8
// without control characters, and that tokenize back to themselves
// (Tokenize of the text, or of the text less a leading space, gives exactly
// that id). Byte-fallback pieces, control and special tokens fail these
// checks. For vocabularies over 2048 ids a seeded sample of 2048 is probed.
// When fewer than 8 ids survive the round trip, the text check alone is
// used. The ids are returned sorted.
func PromptVocab(ctx context.Context, c Client, info *inferencev1.GetModelInfoResponse, seed uint64) ([]int32, error) {
	n := int(info.GetVocabSize())
	if n <= 0 {
		return nil, fmt.Errorf("bench: model reports vocab size %d", n)
	}
	skip := map[int32]bool{info.GetBosTokenId(): true}
	for _, id := range info.GetEogTokenIds() {
		skip[id] = true
	}
	cand := make([]int32, 0, min(n, maxVocabProbe))
	if n <= maxVocabProbe {
		for id := range int32(n) {
			cand = append(cand, id)
		}
	} else {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		for _, id := range r.Perm(n)[:maxVocabProbe] {
			cand = append(cand, int32(id))
		}
		slices.Sort(cand)
	}
	var plain, roundTrip []int32
	for _, id := range cand {
		if skip[id] {
			continue
		}
		dr, err := c.Detokenize(ctx, &inferencev1.DetokenizeRequest{TokenIds: []int32{id}})
		if err != nil {
			return nil, fmt.Errorf("bench: Detokenize(%d): %w", id, err)
		}
		text := dr.GetText()
		if !plainText(text) {
			continue
		}
		plain = append(plain, id)
		for _, t := range []string{text, strings.TrimPrefix(text, " ")} {
			if t == "" {
				continue
			}
			tr, err := c.Tokenize(ctx, &inferencev1.TokenizeRequest{Text: t})
			if err != nil {
				return nil, fmt.Errorf("bench: Tokenize(%q): %w", t, err)
			}
			if ids := tr.GetTokenIds(); len(ids) == 1 && ids[0] == id {
				roundTrip = append(roundTrip, id)
				break
			}
		}
	}
	switch {
	case len(roundTrip) >= 8:
		return roundTrip, nil
	case len(plain) > 0:
		return plain, nil
	}
	return nil, errors.New("bench: no token of the vocabulary decodes to plain text")
}

func plainText(s string) bool {
	if s == "" || !utf8.ValidString(s) || strings.TrimSpace(s) == "" {
		return false
	}
	for _, r := range s {
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\n' && r != '\t') {
			return false
		}
	}
	return true
}
