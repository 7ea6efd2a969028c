package server

import (
	"errors"
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
// with o's options. It checks the wire shape only (UTF-8 of the id); the
// bounds are the scheduler's, checked by Submit, and the sampling ranges
// sample.Params.Validate's. max_tokens 0 is proto3's unset: the default.
func (s *Server) buildRequest(id string, prompt []int32, o genOptions, priority int32) (scheduler.Request, error) {
	if !utf8.ValidString(id) {
		return scheduler.Request{}, reqErr(codes.InvalidArgument, ReasonInvalidUTF8, "request_id", "not valid UTF-8")
	}
	st := o.GetStopping()
	var maxTokens *int
	if v := int(st.GetMaxTokens()); v != 0 {
		maxTokens = &v
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
		MaxTokens:         maxTokens,
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
	done := make(chan frontdoor.Followed, 1)
	stalled := s.door.Follow(ctx, st, s.follow(r, start, done, func(c *inferencev1.Chunk, f *inferencev1.Final, _ *scheduler.Final) error {
		if c != nil {
			if err := stream.Send(&inferencev1.GenerateResponse{Response: &inferencev1.GenerateResponse_Chunk{Chunk: c}}); err != nil {
				return err
			}
		}
		if f != nil {
			return stream.Send(&inferencev1.GenerateResponse{Response: &inferencev1.GenerateResponse_Final{Final: f}})
		}
		return nil
	}))
	select {
	case res := <-done:
		if errors.Is(res.Err, frontdoor.ErrQueueTimeout) {
			return s.refuse(res.Err) // never admitted: a refusal
		}
		return Status(res.Err)
	case <-stalled:
		st.Cancel()
		return Status(errSlowReader)
	}
}

// sendFunc sends one event of a stream: its Chunk (nil when the event
// has no tokens and no text) and, with the last event, its Final (f, and
// sf the scheduler's; both nil before).
type sendFunc func(c *inferencev1.Chunk, f *inferencev1.Final, sf *scheduler.Final) error

// follow is how the server follows r's stream (frontdoor.Door.Follow):
// each event becomes a Chunk, the last one also the Final, handed to
// send; the ending goes to done (capacity 1). A Final cut off by the
// shutdown (scheduler.ErrClosed) is not sent: the stream ends with
// UNAVAILABLE / DRAINING instead.
func (s *Server) follow(r scheduler.Request, start time.Time, done chan<- frontdoor.Followed, send sendFunc) frontdoor.Follow {
	return frontdoor.Follow{
		Door:  frontdoor.DoorGRPC,
		Start: start,
		Send: func(ev scheduler.Event) error {
			var c *inferencev1.Chunk
			if len(ev.Tokens) > 0 || ev.Text != "" {
				c = toChunk(ev, r.Sampling.Logprobs)
			}
			if ev.Final == nil {
				if c == nil {
					return nil
				}
				return send(c, nil, nil)
			}
			if errors.Is(ev.Final.Err, scheduler.ErrClosed) {
				if c != nil {
					if err := send(c, nil, nil); err != nil {
						return err
					}
				}
				return ev.Final.Err
			}
			return send(c, toFinal(r.ID, start, ev.Final), ev.Final)
		},
		Done: func(res frontdoor.Followed) { done <- res },
		Finished: func(f *scheduler.Final) {
			if s.cfg.onFinal != nil {
				s.cfg.onFinal(r.ID, f)
			}
		},
	}
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
