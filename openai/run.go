package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/weft-inference/weft/scheduler"
)

// kind is the endpoint a response is shaped for.
type kind int

const (
	kindCompletion kind = iota
	kindChat
)

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
	switch f.Reason {
	case scheduler.FinishTimeout:
		return fmt.Errorf("%w: not admitted within the queue timeout", scheduler.ErrQueueFull)
	case scheduler.FinishCancelled:
		return context.Canceled
	}
	return errors.New("request ended without a result")
}

// run submits sr and writes the response: one JSON object, or SSE chunks.
// The handler goroutine itself reads the stream; when the client goes
// away, r.Context() ends, Recv returns and the request is cancelled (it
// leaves the batch at the next step).
func (h *Handler) run(w http.ResponseWriter, r *http.Request, sr scheduler.Request, p commonParams, k kind) {
	ctx := r.Context()
	st, err := h.cfg.Scheduler.Submit(ctx, sr)
	if err != nil {
		writeError(w, err)
		return
	}
	var final *scheduler.Final
	defer func() {
		if final == nil {
			st.Cancel()
			final = awaitFinal(st)
		}
		if h.cfg.onFinal != nil && final != nil {
			h.cfg.onFinal(sr.ID, final)
		}
	}()
	created := time.Now().Unix()
	if !p.Stream {
		var text strings.Builder
		for final == nil {
			ev, err := st.Recv(ctx)
			if err != nil {
				writeError(w, recvErr(err))
				return
			}
			text.WriteString(ev.Text)
			final = ev.Final
		}
		fr := finishReason(final)
		if fr == "" {
			writeError(w, finalErr(final))
			return
		}
		u := &usage{PromptTokens: final.PromptTokens, CompletionTokens: final.CompletionTokens,
			TotalTokens: final.PromptTokens + final.CompletionTokens}
		if k == kindChat {
			writeJSON(w, chatResponse{ID: sr.ID, Object: "chat.completion", Created: created, Model: h.cfg.ModelName,
				Choices: []chatChoice{{Message: &chatOut{Role: "assistant", Content: text.String()}, FinishReason: &fr}}, Usage: u})
		} else {
			writeJSON(w, completionResponse{ID: sr.ID, Object: "text_completion", Created: created, Model: h.cfg.ModelName,
				Choices: []completionChoice{{Text: text.String(), FinishReason: &fr}}, Usage: u})
		}
		return
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		return rc.Flush()
	}
	chunk := func(text string, fr *string, first bool) any {
		if k == kindChat {
			d := &chatOut{Content: text}
			if first {
				d.Role = "assistant"
			}
			return chatResponse{ID: sr.ID, Object: "chat.completion.chunk", Created: created, Model: h.cfg.ModelName,
				Choices: []chatChoice{{Delta: d, FinishReason: fr}}}
		}
		return completionResponse{ID: sr.ID, Object: "text_completion", Created: created, Model: h.cfg.ModelName,
			Choices: []completionChoice{{Text: text, FinishReason: fr}}}
	}
	if k == kindChat { // the role comes first, as OpenAI sends it
		if send(chunk("", nil, true)) != nil {
			return
		}
	}
	for final == nil {
		ev, err := st.Recv(ctx)
		if err != nil {
			send(errorBody{Error: apiErrorOf(recvErr(err))})
			return
		}
		final = ev.Final
		if ev.Text != "" {
			if send(chunk(ev.Text, nil, false)) != nil {
				return // the deferred cancel runs only if final is nil
			}
		}
	}
	fr := finishReason(final)
	if fr == "" {
		send(errorBody{Error: apiErrorOf(finalErr(final))})
		return
	}
	if send(chunk("", &fr, false)) != nil {
		return
	}
	if p.StreamOptions != nil && p.StreamOptions.IncludeUsage {
		u := &usage{PromptTokens: final.PromptTokens, CompletionTokens: final.CompletionTokens,
			TotalTokens: final.PromptTokens + final.CompletionTokens}
		var last any = completionResponse{ID: sr.ID, Object: "text_completion", Created: created, Model: h.cfg.ModelName, Choices: []completionChoice{}, Usage: u}
		if k == kindChat {
			last = chatResponse{ID: sr.ID, Object: "chat.completion.chunk", Created: created, Model: h.cfg.ModelName, Choices: []chatChoice{}, Usage: u}
		}
		if send(last) != nil {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	rc.Flush()
}

// recvErr is the error a failed Recv reports.
func recvErr(err error) error {
	if errors.Is(err, io.EOF) {
		return errors.New("scheduler stream ended without a final event")
	}
	return err
}

// awaitFinal reads a cancelled stream to its Final (the scheduler sends it
// at its next step).
func awaitFinal(st *scheduler.Stream) *scheduler.Final {
	for {
		ev, err := st.Recv(context.Background())
		if err != nil {
			return nil
		}
		if ev.Final != nil {
			return ev.Final
		}
	}
}
