package server

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/runtime/sample"
	"github.com/weft-inference/weft/scheduler"
)

// genOptions are the per-request options shared by Generate and Chat turns.
type genOptions interface {
	GetSampling() *inferencev1.SamplingParams
	GetStopping() *inferencev1.StoppingCriteria
	GetLogprobs() *inferencev1.LogprobOptions
	GetResponseFormat() *inferencev1.ResponseFormat
}

// buildRequest makes the scheduler request for prompt (already tokenized)
// with o's options. It checks the wire shape only (UTF-8); the bounds are
// the scheduler's, checked by Submit, and the sampling ranges
// sample.Params.Validate's.
func (s *Server) buildRequest(id string, prompt []int32, o genOptions, priority int32) (scheduler.Request, error) {
	if !utf8.ValidString(id) {
		return scheduler.Request{}, reqErr(codes.InvalidArgument, ReasonInvalidUTF8, "request_id", "not valid UTF-8")
	}
	st := o.GetStopping()
	for _, x := range st.GetStop() {
		if !utf8.ValidString(x) {
			return scheduler.Request{}, reqErr(codes.InvalidArgument, ReasonInvalidUTF8, "stopping.stop", "not valid UTF-8")
		}
	}
	sp, lp := o.GetSampling(), o.GetLogprobs()
	r := s.door.Request(id, prompt, frontdoor.Options{
		Sampling: sample.Params{
			Temperature:       sp.GetTemperature(),
			TopK:              int(sp.GetTopK()),
			TopP:              sp.GetTopP(),
			MinP:              sp.GetMinP(),
			RepetitionPenalty: sp.GetRepetitionPenalty(),
			PresencePenalty:   sp.GetPresencePenalty(),
			FrequencyPenalty:  sp.GetFrequencyPenalty(),
			Seed:              sp.GetSeed(),
			Logprobs:          lp.GetEnabled() || lp.GetTopN() > 0,
			TopLogprobs:       int(lp.GetTopN()),
		},
		SeedSet:           sp != nil && sp.Seed != nil,
		MaxTokens:         int(st.GetMaxTokens()),
		MinTokens:         int(st.GetMinTokens()),
		StopStrings:       st.GetStop(),
		StopTokenIDs:      st.GetStopTokenIds(),
		IncludeStopString: st.GetIncludeStopString(),
		IgnoreEOS:         st.GetIgnoreEos(),
		Priority:          int(priority),
	})
	c, err := s.responseFormat(o.GetResponseFormat())
	if err != nil {
		return r, err
	}
	r.Sampling.Constraint = c
	return r, nil
}

// Generate implements InferenceService.Generate.
func (s *Server) Generate(req *inferencev1.GenerateRequest, stream grpc.ServerStreamingServer[inferencev1.GenerateResponse]) error {
	ctx := stream.Context()
	start := time.Now()
	var prompt []int32
	switch p := req.GetPrompt().(type) {
	case *inferencev1.GenerateRequest_Text:
		if !utf8.ValidString(p.Text) {
			return s.refuse(reqErr(codes.InvalidArgument, ReasonInvalidUTF8, "prompt.text", "not valid UTF-8"))
		}
		if p.Text == "" {
			return s.refuse(reqErr(codes.InvalidArgument, ReasonEmptyPrompt, "prompt.text", "empty prompt"))
		}
		if err := s.door.CheckPromptBytes("prompt.text", len(p.Text)); err != nil {
			return s.refuse(err)
		}
		var err error
		if prompt, err = s.door.Encode(ctx, p.Text, true, req.GetParseSpecial()); err != nil {
			return s.refuse(err)
		}
	case *inferencev1.GenerateRequest_TokenIds:
		prompt = p.TokenIds.GetIds()
	}
	r, err := s.buildRequest(req.GetRequestId(), prompt, req, req.GetPriority())
	if err != nil {
		return s.refuse(err)
	}
	st, err := s.cfg.Scheduler.Submit(ctx, r)
	if err != nil {
		return s.refuse(err)
	}
	// Headers now: the client learns the request was accepted before the
	// first token.
	if err := stream.SendHeader(metadata.MD{}); err != nil {
		st.Cancel()
		return Status(err)
	}
	res := s.pump(ctx, st, r, start, func(c *inferencev1.Chunk, f *inferencev1.Final) error {
		if c != nil {
			return stream.Send(&inferencev1.GenerateResponse{Response: &inferencev1.GenerateResponse_Chunk{Chunk: c}})
		}
		return stream.Send(&inferencev1.GenerateResponse{Response: &inferencev1.GenerateResponse_Final{Final: f}})
	})
	select {
	case out := <-res.done:
		return Status(out.err)
	case <-res.stalled:
		st.Cancel()
		return Status(errSlowReader)
	}
}

// pumpResult is how a stream's pump ended.
type pumpResult struct {
	final *scheduler.Final // nil only if the scheduler never sent one
	text  string           // all text sent
	err   error            // nil when the Final reached the client
}

// pumping is a running pump.
type pumping struct {
	done    <-chan pumpResult // receives once, when the pump has ended
	stalled <-chan time.Time  // fires when one Send blocked past the stall limit
}

// pump starts the one goroutine that reads st and calls send (chunks, then
// the final). It reports on done when the Final was sent, when ctx ends (the
// request is cancelled) or when a Send fails, and then, in the last two
// cases, waits for the scheduler's Final to record it (at most one step).
// If the caller gives up on a stall, the goroutine goes on once the RPC
// handler has returned, which fails the blocked Send.
func (s *Server) pump(ctx context.Context, st *scheduler.Stream, r scheduler.Request, start time.Time,
	send func(*inferencev1.Chunk, *inferencev1.Final) error) pumping {
	done := make(chan pumpResult, 1)
	stall := time.NewTimer(time.Hour)
	stall.Stop()
	guarded := func(c *inferencev1.Chunk, f *inferencev1.Final) error {
		stall.Reset(s.cfg.SendStallTimeout)
		defer stall.Stop()
		return send(c, f)
	}
	go func() {
		var res pumpResult
		var text strings.Builder
		abandoned := false // the request ended early; its Final comes later
		defer func() {
			res.text = text.String()
			done <- res
			if abandoned {
				if s.cfg.onCancel != nil {
					s.cfg.onCancel(r.ID)
				}
				// Do not hold the handler for the scheduler's next step
				// (which may be slow); record the Final when it comes. The
				// scheduler sends one for every accepted request.
				if f := frontdoor.AwaitFinal(st); f != nil {
					s.observe(ctx, r, start, f)
				}
			} else if res.final != nil {
				s.observe(ctx, r, start, res.final)
			}
		}()
		for {
			ev, err := st.Recv(ctx)
			if err != nil {
				if errors.Is(err, io.EOF) {
					res.err = errors.New("scheduler stream ended without a final event")
					return
				}
				st.Cancel()
				abandoned, res.err = true, err
				return
			}
			if len(ev.Tokens) > 0 || ev.Text != "" {
				text.WriteString(ev.Text)
				if err := guarded(toChunk(ev, r.Sampling.Logprobs), nil); err != nil {
					st.Cancel()
					abandoned, res.err = ev.Final == nil, err
					res.final = ev.Final
					return
				}
			}
			if ev.Final != nil {
				res.final = ev.Final
				if errors.Is(ev.Final.Err, scheduler.ErrClosed) {
					// Cut off by the shutdown: the stream ends with
					// UNAVAILABLE / DRAINING, not a Final.
					res.err = ev.Final.Err
					return
				}
				res.err = guarded(nil, toFinal(r.ID, start, ev.Final))
				return
			}
		}
	}()
	return pumping{done: done, stalled: stall.C}
}

func toChunk(ev scheduler.Event, logprobs bool) *inferencev1.Chunk {
	c := &inferencev1.Chunk{TokenIds: make([]int32, len(ev.Tokens)), Text: ev.Text}
	for i, t := range ev.Tokens {
		c.TokenIds[i] = t.ID
	}
	if logprobs {
		c.Logprobs = make([]*inferencev1.TokenLogprob, len(ev.Tokens))
		for i, t := range ev.Tokens {
			lp := &inferencev1.TokenLogprob{TokenId: t.ID, Logprob: t.Logprob}
			for _, a := range t.Top {
				lp.Top = append(lp.Top, &inferencev1.TopLogprob{TokenId: a.Token, Logprob: a.Logprob})
			}
			c.Logprobs[i] = lp
		}
	}
	return c
}

var finishReasons = map[scheduler.FinishReason]inferencev1.FinishReason{
	scheduler.FinishEOS:          inferencev1.FinishReason_FINISH_REASON_EOS,
	scheduler.FinishLength:       inferencev1.FinishReason_FINISH_REASON_LENGTH,
	scheduler.FinishStopSequence: inferencev1.FinishReason_FINISH_REASON_STOP_SEQUENCE,
	scheduler.FinishCancelled:    inferencev1.FinishReason_FINISH_REASON_CANCELLED,
	scheduler.FinishError:        inferencev1.FinishReason_FINISH_REASON_ERROR,
	scheduler.FinishTimeout:      inferencev1.FinishReason_FINISH_REASON_TIMEOUT,
}

func toFinal(id string, start time.Time, f *scheduler.Final) *inferencev1.Final {
	out := &inferencev1.Final{
		FinishReason: finishReasons[f.Reason],
		Usage: &inferencev1.Usage{
			PromptTokens:     int32(f.PromptTokens),
			CompletionTokens: int32(f.CompletionTokens),
			CachedTokens:     int32(f.CachedTokens),
		},
		Timings: &inferencev1.Timings{
			QueueWait:           durationpb.New(f.QueueWait),
			TimeToFirstToken:    durationpb.New(f.TTFT),
			Total:               durationpb.New(time.Since(start)),
			DraftTokens:         int32(f.DraftTokens),
			AcceptedDraftTokens: int32(f.AcceptedTokens),
		},
		StopMatched: f.StopMatched,
		RequestId:   id,
	}
	if f.Err != nil {
		out.ErrorMessage = f.Err.Error()
	}
	return out
}
