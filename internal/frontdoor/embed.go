package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weft-inference/weft/scheduler"
)

// MaxEmbedInputs bounds the inputs of one embedding request (OpenAI's own
// bound on /v1/embeddings). Each input is one scheduler sequence, at most
// Limits.MaxEmbedTokens tokens long.
const MaxEmbedInputs = 2048

// Neutral field names of embedding errors (a door renames them).
const (
	FieldEmbedInput      = "input"
	FieldEmbedDimensions = "dimensions"
)

// Errors of embedding requests.
var (
	// ErrEmptyInput: an input text of no bytes (an empty token-id input
	// is the scheduler's scheduler.ErrEmptyPrompt).
	ErrEmptyInput = errors.New("empty input")
	// ErrDimensions is wrapped by *DimensionsError.
	ErrDimensions = errors.New("embedding dimensions not served")
)

// InputError is an error of one input of an embedding request: a
// *BytesError, ErrEmptyInput, or the scheduler's refusal of its tokens (a
// *scheduler.LimitError). A door names the input by Index.
type InputError struct {
	Index int
	Err   error
}

func (e *InputError) Error() string {
	return fmt.Sprintf("%s[%d]: %v", FieldEmbedInput, e.Index, e.Err)
}

// Unwrap returns the input's error.
func (e *InputError) Unwrap() error { return e.Err }

// DimensionsError is a request for vectors of another length than the
// model's hidden size: weft returns the model's vectors whole (it does not
// truncate them, which only models trained for it allow). It wraps
// ErrDimensions.
type DimensionsError struct {
	Got  int // the dimensions asked for
	Want int // Limits.EmbedDim
}

func (e *DimensionsError) Error() string {
	return fmt.Sprintf("%s: %d, but the model's embeddings have %d (they are not truncated)", FieldEmbedDimensions, e.Got, e.Want)
}

// Unwrap returns ErrDimensions.
func (e *DimensionsError) Unwrap() error { return ErrDimensions }

// Submitter is what Embed needs of the scheduler; *scheduler.Scheduler
// implements it.
type Submitter interface {
	Submit(ctx context.Context, r scheduler.Request) (*scheduler.Stream, error)
}

// EmbedInput is one input of an embedding request: text, tokenized by the
// Door with the model's special tokens (BOS), or token ids used as given.
type EmbedInput struct {
	Text string
	IDs  []int32
	// Tokens says the input is IDs (Text is not read).
	Tokens bool
}

// EmbedRequest is an embedding request as a door decoded it.
type EmbedRequest struct {
	// Door labels the sequences' metrics (DoorGRPC, DoorOpenAI).
	Door string
	// Start is the request's arrival.
	Start time.Time
	// ID is the request id (logs); may be empty.
	ID string
	// Inputs are embedded each as its own sequence: 1 to MaxEmbedInputs.
	Inputs []EmbedInput
	// Dimensions, when non-zero, must be Limits.EmbedDim.
	Dimensions int
	// Priority is every sequence's scheduler priority.
	Priority int
}

// Embeddings are an embedding request's result.
type Embeddings struct {
	// Vectors holds one vector per input, in input order: Limits.EmbedDim
	// values of unit L2 norm.
	Vectors [][]float32
	// Tokens counts each input's tokens, PromptTokens all of them.
	Tokens       []int
	PromptTokens int
}

// Embed checks r, tokenizes its text inputs and runs every input through
// sub as an embedding sequence (scheduler.Request.Embed), keeping at most
// Limits.MaxSeqs of them submitted at a time so that one request of many
// inputs neither fills the waiting queue nor overtakes the requests
// queued after it by more than a batch. It returns when every vector is
// in, or at the first failure (an input refused, a sequence failed, ctx
// ended); the sequences still running are then cancelled.
//
// Errors: scheduler.ErrNoEmbeddings (wrapped, with the reason), a
// *scheduler.LimitError for the number of inputs (Field "input"), a
// *DimensionsError, an *InputError for one input, and Submit's errors
// (queue full, draining), ErrQueueTimeout, a sequence's Final.Err.
func (d *Door) Embed(ctx context.Context, sub Submitter, r EmbedRequest) (*Embeddings, error) {
	l := d.cfg.Limits
	if l.EmbedDim == 0 {
		return nil, fmt.Errorf("%w: %s", scheduler.ErrNoEmbeddings, l.NoEmbeddings)
	}
	n := len(r.Inputs)
	if n == 0 || n > MaxEmbedInputs {
		op, lim := "<=", MaxEmbedInputs
		if n == 0 {
			op, lim = ">=", 1
		}
		return nil, &scheduler.LimitError{Field: FieldEmbedInput, What: "inputs", Op: op, Limit: lim, Got: n, Err: scheduler.ErrInvalidRequest}
	}
	if r.Dimensions != 0 && r.Dimensions != l.EmbedDim {
		return nil, &DimensionsError{Got: r.Dimensions, Want: l.EmbedDim}
	}
	// Every input is tokenized before any runs: a bad one fails the
	// request before it costs a step.
	prompts := make([][]int32, n)
	for i, in := range r.Inputs {
		if in.Tokens {
			prompts[i] = in.IDs
			continue
		}
		if in.Text == "" {
			return nil, &InputError{Index: i, Err: ErrEmptyInput}
		}
		if err := d.CheckPromptBytes(FieldEmbedInput, len(in.Text)); err != nil {
			return nil, &InputError{Index: i, Err: err}
		}
		ids, err := d.Encode(ctx, in.Text, true, false)
		if err != nil {
			return nil, err
		}
		prompts[i] = ids
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the sequences still running when Embed returns
	type done struct {
		i   int
		f   *scheduler.Final
		err error
	}
	// One message per submitted sequence, buffered so that no following
	// goroutine waits on Embed.
	results := make(chan done, n)
	next := 0
	submit := func() error {
		i := next
		next++
		st, err := sub.Submit(ctx, scheduler.Request{ID: r.ID, Prompt: prompts[i], Embed: true, Priority: r.Priority, QueueTimeout: d.cfg.QueueTimeout})
		if err != nil {
			if errors.Is(err, scheduler.ErrInvalidRequest) || errors.Is(err, scheduler.ErrPromptTooLong) {
				err = &InputError{Index: i, Err: err}
			}
			return err
		}
		d.Follow(ctx, st, Follow{
			Door:  r.Door,
			Start: r.Start,
			Send: func(ev scheduler.Event) error {
				if ev.Final != nil {
					results <- done{i: i, f: ev.Final}
				}
				return nil
			},
			Done: func(res Followed) {
				if res.Err != nil {
					results <- done{i: i, err: res.Err}
				}
			},
		})
		return nil
	}
	for next < min(n, max(l.MaxSeqs, 1)) {
		if err := submit(); err != nil {
			return nil, err
		}
	}
	out := &Embeddings{Vectors: make([][]float32, n), Tokens: make([]int, n)}
	for range n {
		var res done
		select {
		case res = <-results:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if res.err != nil {
			return nil, res.err
		}
		f := res.f
		if f.Reason != scheduler.FinishEmbedded {
			if f.Err != nil {
				return nil, f.Err
			}
			if f.Reason == scheduler.FinishCancelled {
				return nil, context.Canceled
			}
			return nil, fmt.Errorf("embedding of input %d ended without a vector (%s)", res.i, FinishLabels[f.Reason])
		}
		out.Vectors[res.i] = f.Embedding
		out.Tokens[res.i] = f.PromptTokens
		out.PromptTokens += f.PromptTokens
		if next < n {
			if err := submit(); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
