package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/runtime/toolcall"
	"github.com/weft-inference/weft/scheduler"
)

// kind is the endpoint a response is shaped for.
type kind int

const (
	kindCompletion kind = iota
	kindChat
	kindResponse // POST /v1/responses (responses.go)
)

// jobPrompt is one prompt of a job and what its choices start with.
type jobPrompt struct {
	reqs    []scheduler.Request // one per choice (frontdoor.Door.Requests)
	echo    string              // text prepended to each choice (echo)
	echoIDs []int32             // prompt tokens listed first in logprobs (echo with logprobs)
}

// job is a validated request: n choices for each prompt. Choice i
// belongs to prompt i/n and is its request reqs[i%n].
type job struct {
	id       string
	kind     kind
	model    string // the id the request named, echoed in responses
	n        int
	params   commonParams
	logprobs logprobSpec
	prompts  []jobPrompt
	tools    *frontdoor.ToolSpec // chat with tools to parse the reply for (ToolSpec.Parse), else nil
}

// choice is one sequence of a job as the handler assembles it.
type choice struct {
	index  int
	prompt int
	st     *scheduler.Stream
	text   strings.Builder
	offset int // bytes of text so far, counted by token (text_offset)
	chatLP []chatTokenLogprob
	cmplLP *completionLogprobs
	final  *scheduler.Final
	reply  *reply // the parsed reply, when the job has tools
}

// update is one event of one choice's stream, or the error that ended it.
type update struct {
	c   *choice
	ev  scheduler.Event
	err error
}

// finishReason is OpenAI's finish_reason for f, or "" when f ended the
// request with an error (cancelled, timed out, failed).
func finishReason(f *scheduler.Final) string {
	switch f.Reason {
	case scheduler.FinishEOS, scheduler.FinishStopSequence:
		return "stop"
	case scheduler.FinishLength:
		return "length"
	}
	return ""
}

// finalErr is the error of a Final that did not end normally.
func finalErr(f *scheduler.Final) error {
	if f.Err != nil {
		return f.Err
	}
	if f.Reason == scheduler.FinishCancelled {
		return context.Canceled
	}
	return errors.New("request ended without a result")
}

// follow follows c's stream (frontdoor.Door.Follow): each event goes to
// the handler goroutine on out, and so does the error that ends the
// following early. When ctx ends first (the handler returned or the
// client left) the Door cancels the sequence and records its Final when
// the scheduler sends it.
func (h *Handler) follow(ctx context.Context, j *job, c *choice, start time.Time, out chan<- update) {
	put := func(u update) error {
		select {
		case out <- u:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	door := frontdoor.DoorOpenAI
	if j.kind == kindResponse {
		door = frontdoor.DoorResponses
	}
	h.door.Follow(ctx, c.st, frontdoor.Follow{
		Door:  door,
		Start: start,
		Send:  func(ev scheduler.Event) error { return put(update{c: c, ev: ev}) },
		Done: func(res frontdoor.Followed) {
			if res.Err != nil {
				put(update{c: c, err: j.wireErr(res.Err)})
			}
		},
		Finished: func(f *scheduler.Final) {
			if h.cfg.onFinal != nil {
				h.cfg.onFinal(j.id, f)
			}
		},
	})
}

// wireErr renames the owners' field names in err where this endpoint's
// parameter differs: completions' logprobs is the sampler's
// top_logprobs; responses' names are respWireErr's.
func (j *job) wireErr(err error) error {
	if j.kind == kindResponse {
		return respWireErr(err)
	}
	var pe *sample.ParamError
	if j.kind == kindCompletion && errors.As(err, &pe) && pe.Field == "top_logprobs" {
		return badParam("logprobs", "%s", pe.Msg)
	}
	return err
}

// run submits the job's sequences and writes the response: one JSON
// object, or SSE chunks. The first choice of each prompt is submitted at
// once, the other n-1 when it has produced its first event: its prompt's
// full KV blocks are then in the prefix cache, so the n choices cost one
// prefill (plus, for each later choice, the prompt's last partial block).
// When the client goes away, r.Context() ends and every sequence is
// cancelled (it leaves the batch at the next step).
func (h *Handler) run(w http.ResponseWriter, r *http.Request, j *job) {
	start := time.Now()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	updates := make(chan update)
	choices := make([]*choice, len(j.prompts)*j.n)
	for i := range choices {
		choices[i] = &choice{index: i, prompt: i / j.n}
		if j.tools != nil {
			choices[i].reply = &reply{h.door.NewReply(j.tools, j.prompts[i/j.n].reqs[0].Prompt, frontdoor.ReplyOptions{})}
		}
		if j.logprobs.on && j.kind == kindCompletion {
			choices[i].cmplLP = &completionLogprobs{Tokens: []string{}, TokenLogprobs: []*float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
		}
	}
	submit := func(c *choice) error {
		st, err := h.cfg.Scheduler.Submit(ctx, j.prompts[c.prompt].reqs[c.index%j.n])
		if err != nil {
			return j.wireErr(err)
		}
		c.st = st
		h.follow(ctx, j, c, start, updates)
		return nil
	}
	for p := range j.prompts {
		if err := submit(choices[p*j.n]); err != nil {
			writeError(w, err)
			return
		}
	}
	out := &writer{ctx: ctx, h: h, w: w, rc: http.NewResponseController(w), j: j, created: start.Unix(), stall: h.door.SendStallTimeout()}
	defer out.rc.SetWriteDeadline(time.Time{})
	if j.params.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		for _, c := range choices {
			if out.start(c) != nil {
				return
			}
		}
	}
	fail := func(err error) {
		if j.params.Stream {
			out.send(errorBody{Error: apiErrorOf(err)})
		} else {
			writeError(w, err)
		}
	}
	for _, c := range choices { // echoed text leads the choice's text
		c.text.WriteString(j.prompts[c.prompt].echo)
		c.offset = len(j.prompts[c.prompt].echo)
		if ids := j.prompts[c.prompt].echoIDs; c.cmplLP != nil && len(ids) > 0 {
			h.addCompletionLogprobs(c.cmplLP, nil, ids, 0)
		}
	}
	launched := make([]bool, len(j.prompts))
	for pending := len(choices); pending > 0; {
		var u update
		select {
		case u = <-updates:
		case <-ctx.Done():
			return // the client left; the readers cancel the sequences
		}
		if u.err != nil {
			fail(u.err)
			return
		}
		c := u.c
		if p := c.prompt; !launched[p] {
			launched[p] = true
			for k := 1; k < j.n; k++ {
				if err := submit(choices[p*j.n+k]); err != nil {
					fail(err)
					return
				}
			}
		}
		delta := h.add(j, c, u.ev)
		fr := ""
		if u.ev.Final != nil {
			c.final = u.ev.Final
			if fr = finishReason(c.final); fr == "" {
				fail(finalErr(c.final))
				return
			}
			if c.reply != nil {
				var err error
				if fr, err = c.reply.finishReason(c.final, fr); err != nil {
					h.log.WarnContext(ctx, "openai: malformed tool call", "request", j.id, "choice", c.index, "err", err)
					fail(err)
					return
				}
			}
			pending--
		}
		if j.params.Stream && c.reply != nil {
			if out.replyChunks(c, delta) != nil {
				return
			}
		} else if j.params.Stream {
			if delta.text != "" || delta.tokens > 0 {
				var err error
				if delta.chatLP == nil && delta.cmplLP == nil {
					err = out.textChunk(c, delta.text)
				} else {
					err = out.send(out.chunk(c, delta, nil))
				}
				if err != nil {
					return
				}
			}
		}
		if j.params.Stream && c.final != nil {
			if out.send(out.chunk(c, chunkDelta{}, &fr)) != nil {
				return
			}
		}
	}
	u := usageOf(j, choices)
	h.log.DebugContext(ctx, "openai request done", "choices", len(choices),
		"prompt_tokens_computed", u.computed, "completion_tokens", u.CompletionTokens)
	if !j.params.Stream {
		out.whole(choices, &u.usage)
		return
	}
	if so := j.params.StreamOptions; so != nil && so.IncludeUsage {
		if out.send(out.usageChunk(&u.usage)) != nil {
			return
		}
	}
	out.raw("data: [DONE]\n\n")
}

// jobUsage is a job's usage, and the prompt tokens the model computed
// (not served from the prefix cache) over all its sequences.
type jobUsage struct {
	usage
	computed int
}

// usageOf sums the choices' Finals. Each prompt counts once in
// prompt_tokens and cached_tokens (its first choice's: what the prefix
// cache held before the request), as OpenAI counts a prompt once however
// many choices it has; completion tokens count every choice's. With tools
// or speculative drafts it adds completion_tokens_details: reasoning
// tokens, and the drafted tokens accepted and rejected.
func usageOf(j *job, choices []*choice) jobUsage {
	var u jobUsage
	var d completionTokensDetails
	cached, drafted := 0, 0
	for _, c := range choices {
		f := c.final
		u.CompletionTokens += f.CompletionTokens
		u.computed += f.PromptTokens - f.CachedTokens
		if c.index%j.n == 0 {
			u.PromptTokens += f.PromptTokens
			cached += f.CachedTokens
		}
		if c.reply != nil {
			d.ReasoningTokens += c.reply.ReasoningTokens
		}
		drafted += f.DraftTokens
		d.AcceptedPredictionTokens += f.AcceptedTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	d.RejectedPredictionTokens = drafted - d.AcceptedPredictionTokens
	if j.tools != nil || drafted > 0 {
		u.CompletionTokensDetails = &d
	}
	u.PromptTokensDetails = &promptTokensDetails{CachedTokens: cached}
	return u
}

// chunkDelta is what one event added to a choice.
type chunkDelta struct {
	text   string
	tokens int
	chatLP []chatTokenLogprob
	cmplLP *completionLogprobs
	events []toolcall.Event // the parsed reply's events (a job with tools)
}

// add appends ev to c and returns what it added.
func (h *Handler) add(j *job, c *choice, ev scheduler.Event) chunkDelta {
	d := chunkDelta{text: ev.Text, tokens: len(ev.Tokens)}
	if c.reply != nil {
		d.events = c.reply.Push(ev.Text, len(ev.Tokens))
		if ev.Final != nil {
			d.events = append(d.events, c.reply.Finish()...)
		}
	} else {
		c.text.WriteString(ev.Text)
	}
	if !j.logprobs.on || len(ev.Tokens) == 0 {
		return d
	}
	if j.kind != kindCompletion { // chat's shape (responses' output_text too)
		d.chatLP = h.chatLogprobs(ev.Tokens)
		c.chatLP = append(c.chatLP, d.chatLP...)
		return d
	}
	d.cmplLP = &completionLogprobs{}
	h.addCompletionLogprobs(d.cmplLP, ev.Tokens, nil, c.offset)
	c.offset = h.addCompletionLogprobs(c.cmplLP, ev.Tokens, nil, c.offset)
	return d
}

// chatLogprobs is toks in chat's logprobs shape.
func (h *Handler) chatLogprobs(toks []scheduler.Token) []chatTokenLogprob {
	out := make([]chatTokenLogprob, len(toks))
	for i, t := range toks {
		out[i] = chatTokenLogprob{chatTopLogprob: h.topLogprob(t.ID, t.Logprob), TopLogprobs: make([]chatTopLogprob, len(t.Top))}
		for k, a := range t.Top {
			out[i].TopLogprobs[k] = h.topLogprob(a.Token, a.Logprob)
		}
	}
	return out
}

func (h *Handler) topLogprob(id int32, lp float32) chatTopLogprob {
	b := h.cfg.Tokenizer.TokenBytes(id)
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	return chatTopLogprob{Token: string(b), Logprob: float64(lp), Bytes: ints}
}

// addCompletionLogprobs appends generated tokens toks (or prompt tokens
// ids, whose logprobs are null) to dst, with text offsets from offset; it
// returns the offset after them.
func (h *Handler) addCompletionLogprobs(dst *completionLogprobs, toks []scheduler.Token, ids []int32, offset int) int {
	for _, id := range ids {
		b := h.cfg.Tokenizer.TokenBytes(id)
		dst.Tokens = append(dst.Tokens, string(b))
		dst.TokenLogprobs = append(dst.TokenLogprobs, nil)
		dst.TopLogprobs = append(dst.TopLogprobs, nil)
		dst.TextOffset = append(dst.TextOffset, offset)
		offset += len(b)
	}
	for _, t := range toks {
		b := h.cfg.Tokenizer.TokenBytes(t.ID)
		lp := float64(t.Logprob)
		top := make(map[string]float64, len(t.Top))
		for _, a := range t.Top {
			s := string(h.cfg.Tokenizer.TokenBytes(a.Token))
			if _, dup := top[s]; !dup { // most likely first: keep the first of equal texts
				top[s] = float64(a.Logprob)
			}
		}
		dst.Tokens = append(dst.Tokens, string(b))
		dst.TokenLogprobs = append(dst.TokenLogprobs, &lp)
		dst.TopLogprobs = append(dst.TopLogprobs, top)
		dst.TextOffset = append(dst.TextOffset, offset)
		offset += len(b)
	}
	return offset
}

// writer writes one job's response.
type writer struct {
	ctx     context.Context // the request's (its log lines carry the request id)
	h       *Handler
	w       http.ResponseWriter
	rc      *http.ResponseController
	j       *job
	created int64
	stall   time.Duration // the Door's SendStallTimeout
	head    []byte        // a text chunk's bytes up to its choice index (textChunk)
	buf     []byte        // scratch for one event
}

// raw writes s and flushes it, within SendStallTimeout: a client that
// accepts nothing for that long fails the write (and so the request).
func (o *writer) raw(s string) error { return o.rawBytes([]byte(s)) }

func (o *writer) rawBytes(b []byte) error {
	o.rc.SetWriteDeadline(time.Now().Add(o.stall))
	_, err := o.w.Write(b)
	if err == nil {
		err = o.rc.Flush()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		o.h.metrics.slowReaders.Inc()
		if o.h.cfg.onSlowReader != nil {
			o.h.cfg.onSlowReader()
		}
		o.h.log.WarnContext(o.ctx, "openai: slow reader cut off", "request", o.j.id, "stall", o.stall)
	}
	return err
}

// textChunk writes the SSE event of a chunk of choice c that carries
// only text: the bytes json.Marshal gives for o.chunk(c, {text}, nil),
// built from a prefix encoded once per response (a stream's most frequent
// event, so its cost is the HTTP door's per-token cost).
func (o *writer) textChunk(c *choice, text string) error {
	if o.head == nil {
		obj := "text_completion"
		if o.j.kind == kindChat {
			obj = "chat.completion.chunk"
		}
		id, _ := json.Marshal(o.j.id)
		model, _ := json.Marshal(o.j.model)
		o.head = fmt.Appendf(nil, `data: {"id":%s,"object":"%s","created":%d,"model":%s,"choices":[{"index":`, id, obj, o.created, model)
	}
	t, err := json.Marshal(text)
	if err != nil {
		return err
	}
	b := append(o.buf[:0], o.head...)
	b = strconv.AppendInt(b, int64(c.index), 10)
	if o.j.kind == kindChat {
		b = append(b, `,"delta":{"content":`...)
		b = append(b, t...)
		b = append(b, `},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	} else {
		b = append(b, `,"text":`...)
		b = append(b, t...)
		b = append(b, `,"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	}
	o.buf = b
	return o.rawBytes(b)
}

// send writes v as one SSE event.
func (o *writer) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return o.raw("data: " + string(b) + "\n\n")
}

// start sends what a choice's stream opens with: the role (chat) or the
// echoed prompt (completions with echo).
func (o *writer) start(c *choice) error {
	if o.j.kind == kindChat {
		empty := ""
		return o.send(chatResponse{ID: o.j.id, Object: "chat.completion.chunk", Created: o.created, Model: o.j.model,
			Choices: []chatChoice{{Index: c.index, Delta: &chatOut{Role: "assistant", Content: &empty}}}})
	}
	p := o.j.prompts[c.prompt]
	if p.echo == "" {
		return nil
	}
	ch := completionChoice{Index: c.index, Text: p.echo}
	if c.cmplLP != nil {
		ch.Logprobs = &completionLogprobs{}
		o.h.addCompletionLogprobs(ch.Logprobs, nil, p.echoIDs, 0)
	}
	return o.send(completionResponse{ID: o.j.id, Object: "text_completion", Created: o.created, Model: o.j.model,
		Choices: []completionChoice{ch}})
}

// chunk is one SSE chunk of choice c: d's text and logprobs, or its
// finish reason.
func (o *writer) chunk(c *choice, d chunkDelta, fr *string) any {
	if o.j.kind == kindChat {
		ch := chatChoice{Index: c.index, Delta: &chatOut{}, FinishReason: fr}
		if fr == nil {
			ch.Delta.Content = &d.text
		}
		if d.chatLP != nil {
			ch.Logprobs = &chatLogprobs{Content: d.chatLP}
		}
		return chatResponse{ID: o.j.id, Object: "chat.completion.chunk", Created: o.created, Model: o.j.model,
			Choices: []chatChoice{ch}}
	}
	return completionResponse{ID: o.j.id, Object: "text_completion", Created: o.created, Model: o.j.model,
		Choices: []completionChoice{{Index: c.index, Text: d.text, Logprobs: d.cmplLP, FinishReason: fr}}}
}

// replyChunks writes the chunks of a parsed reply's events (deltas), the
// event's logprobs with the first (or alone, in a chunk without a delta,
// when the tokens gave no event yet).
func (o *writer) replyChunks(c *choice, d chunkDelta) error {
	ds := deltas(d.events)
	if len(ds) == 0 && d.chatLP != nil {
		ds = []chatOut{{}}
	}
	for k := range ds {
		ch := chatChoice{Index: c.index, Delta: &ds[k]}
		if k == 0 && d.chatLP != nil {
			ch.Logprobs = &chatLogprobs{Content: d.chatLP}
		}
		err := o.send(chatResponse{ID: o.j.id, Object: "chat.completion.chunk", Created: o.created, Model: o.j.model,
			Choices: []chatChoice{ch}})
		if err != nil {
			return err
		}
	}
	return nil
}

// usageChunk is the last chunk of a stream with include_usage: no
// choices, the usage.
func (o *writer) usageChunk(u *usage) any {
	if o.j.kind == kindChat {
		return chatResponse{ID: o.j.id, Object: "chat.completion.chunk", Created: o.created, Model: o.j.model, Choices: []chatChoice{}, Usage: u}
	}
	return completionResponse{ID: o.j.id, Object: "text_completion", Created: o.created, Model: o.j.model, Choices: []completionChoice{}, Usage: u}
}

// whole writes the non-streamed response.
func (o *writer) whole(choices []*choice, u *usage) {
	var v any
	if o.j.kind == kindChat {
		out := make([]chatChoice, len(choices))
		for i, c := range choices {
			fr := finishReason(c.final)
			content := c.text.String()
			msg := &chatOut{Role: "assistant", Content: &content}
			if c.reply != nil {
				msg = c.reply.message()
				fr, _ = c.reply.finishReason(c.final, fr) // its error failed the request before
			}
			out[i] = chatChoice{Index: c.index, Message: msg, FinishReason: &fr}
			if o.j.logprobs.on {
				out[i].Logprobs = &chatLogprobs{Content: c.chatLP}
				if c.chatLP == nil {
					out[i].Logprobs.Content = []chatTokenLogprob{}
				}
			}
		}
		v = chatResponse{ID: o.j.id, Object: "chat.completion", Created: o.created, Model: o.j.model, Choices: out, Usage: u}
	} else {
		out := make([]completionChoice, len(choices))
		for i, c := range choices {
			fr := finishReason(c.final)
			out[i] = completionChoice{Index: c.index, Text: c.text.String(), Logprobs: c.cmplLP, FinishReason: &fr}
		}
		v = completionResponse{ID: o.j.id, Object: "text_completion", Created: o.created, Model: o.j.model, Choices: out, Usage: u}
	}
	b, err := json.Marshal(v)
	if err != nil {
		writeError(o.w, err)
		return
	}
	o.w.Header().Set("Content-Type", "application/json")
	o.raw(string(b) + "\n")
}
