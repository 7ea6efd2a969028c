package scheduler

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// Scheduler merges every in-flight request into one ragged batch per step.
// Submit, Stream.Cancel, Drain and Stats are safe from any goroutine; Run
// is the one goroutine that owns the state.
type Scheduler struct {
	cfg   Config
	model Model
	// verifier is the model when it verifies drafts and Config.Spec is
	// on; the loop then steps through StepDrafts.
	verifier Verifier
	core     *core // owned by Run

	submitc chan *seq     // capacity MaxWaiting: Submit never blocks on it
	cancelc chan *seq     // cancellations from the requests' AfterFuncs
	wake    chan struct{} // capacity 1: Drain pokes the idle loop
	done    chan struct{} // closed when Run returns

	mu     sync.RWMutex // Submit holds it shared; Run's exit exclusively
	closed bool

	queued   atomic.Int64 // submitted and never admitted (the waiting bound)
	draining atomic.Bool
	started  atomic.Bool
	nextID   atomic.Uint64
	stats    atomic.Pointer[Stats]

	drainOnce sync.Once
	drained   chan struct{}

	// eog lists the end-of-generation ids (from cfg.IsEOG over the
	// vocabulary), suppressed in sampling until a request's MinTokens.
	eog []int32

	// afterStep, when set (tests), runs on the loop after every step.
	afterStep func(*core)
}

// New returns a scheduler for model m. Call Run to start it.
func New(cfg Config, m Model) (*Scheduler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("scheduler: nil Model")
	}
	s := &Scheduler{
		cfg:     cfg,
		model:   m,
		submitc: make(chan *seq, cfg.MaxWaiting),
		cancelc: make(chan *seq, 64),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		drained: make(chan struct{}),
	}
	if cfg.IsEOG != nil {
		for id := 0; id < cfg.VocabSize; id++ {
			if cfg.IsEOG(int32(id)) {
				s.eog = append(s.eog, int32(id))
			}
		}
	}
	cfg.embedDim, cfg.noEmbed = 0, "static batching runs fixed generation groups"
	if cfg.Batching == BatchingContinuous {
		cfg.noEmbed = "the model's backend produces no hidden states"
		if h, ok := m.(hiddenModel); ok && h.HiddenSize() > 0 {
			cfg.embedDim, cfg.noEmbed = h.HiddenSize(), ""
		}
	}
	s.cfg = cfg
	if cfg.Spec.on() {
		v, ok := m.(Verifier)
		if !ok || !v.VerifiesDrafts() {
			return nil, fmt.Errorf("scheduler: config: Spec %q: the model does not verify drafted tokens (its backend computes one logits row per sequence); use Spec %q", cfg.Spec.Source, SpecOff)
		}
		s.verifier = v
	}
	s.core = newCore(cfg, &s.queued)
	s.core.drafts = s.verifier != nil
	st := s.core.snapshot(false)
	s.stats.Store(&st)
	return s, nil
}

// hiddenModel is a Model that computes hidden states (batch.SeqStep.Hidden)
// of HiddenSize values per token, 0 when its backend produces none;
// runtime.Engine implements it. Only such a model serves embedding
// requests.
type hiddenModel interface {
	HiddenSize() int
}

// minTokensParams returns r's sampling parameters with the end-of-generation
// and stop token ids suppressed until MinTokens tokens exist, so min_tokens
// changes what is sampled (as in vLLM) instead of letting an EOS through as
// text.
func (s *Scheduler) minTokensParams(r Request) sample.Params {
	p := r.Sampling
	if r.MinTokens <= 0 {
		return p
	}
	sup := append([]int32(nil), r.StopTokenIDs...)
	if !r.IgnoreEOS {
		sup = append(sup, s.eog...)
	}
	if len(sup) > 0 {
		p.Suppress = append(sup, p.Suppress...)
		p.SuppressUntil = max(p.SuppressUntil, r.MinTokens)
	}
	return p
}

// newSampler makes the per-sequence sampler; the model uses it to sample,
// the scheduler only carries it (across preemptions too).
func newSampler(p sample.Params, prompt []int32) *sample.Sampler { return sample.New(p, prompt) }

// Submit queues r. ctx is the request's: when it ends, the sequence is
// cancelled and leaves the batch at the next step. A request outside
// Limits() is refused with a *LimitError naming the field and its bound
// (wrapping ErrPromptTooLong for a prompt over the context,
// ErrTokenOutOfRange for an id outside the vocabulary, ErrInvalidRequest
// otherwise) or, for the sampling parameters, a *sample.ParamError wrapped
// with ErrInvalidRequest. An embedding request (Request.Embed) this
// scheduler cannot serve is refused with ErrNoEmbeddings. The other errors
// wrap ErrQueueFull (decided here, without waiting), ErrDraining or
// ErrClosed.
func (s *Scheduler) Submit(ctx context.Context, r Request) (*Stream, error) {
	if err := s.cfg.limits().check(r); err != nil {
		return nil, err
	}
	if s.draining.Load() {
		return nil, ErrDraining
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	for {
		n := s.queued.Load()
		if n >= int64(s.cfg.MaxWaiting) {
			return nil, fmt.Errorf("%w: %d requests waiting", ErrQueueFull, n)
		}
		if s.queued.CompareAndSwap(n, n+1) {
			break
		}
	}

	rctx, cancel := context.WithCancel(ctx)
	sq := &seq{
		id:        s.nextID.Add(1),
		req:       r,
		st:        newStream(cancel),
		sent:      make(chan struct{}),
		submitted: time.Now(),
		tokens:    append(make([]int32, 0, len(r.Prompt)+min(r.MaxTokens, 256)), r.Prompt...),
		promptLen: len(r.Prompt),
	}
	if r.Embed {
		sq.pool = batch.NewPool(s.cfg.Pooling, s.cfg.embedDim)
	} else {
		sq.sampler = newSampler(s.minTokensParams(r), r.Prompt)
	}
	if r.QueueTimeout > 0 {
		sq.deadline = sq.submitted.Add(r.QueueTimeout)
	}
	if s.cfg.NewDecoder != nil {
		sq.dec = s.cfg.NewDecoder()
	}
	// The AfterFunc waits for sent so the loop always has the submission
	// before the cancellation (it drains submitc before handling one).
	sq.stopAfter = context.AfterFunc(rctx, func() {
		select {
		case <-sq.sent:
		case <-s.done:
			return
		}
		select {
		case s.cancelc <- sq:
		case <-s.done:
		}
	})
	s.submitc <- sq // never blocks: queued <= MaxWaiting = cap(submitc)
	close(sq.sent)
	return sq.st, nil
}

// Drain stops accepting requests (Submit fails with ErrDraining); the ones
// already accepted, waiting or running, go on to the end.
func (s *Scheduler) Drain() {
	s.draining.Store(true)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Drained is closed once Drain was called and every accepted request has
// ended (or Run has returned).
func (s *Scheduler) Drained() <-chan struct{} { return s.drained }

// Stats returns the snapshot taken after the last step or event.
func (s *Scheduler) Stats() Stats { return *s.stats.Load() }

// Run is the scheduler loop. It returns ctx.Err() when ctx ends; every
// request still in flight then ends with FinishError and ErrClosed. Run may
// be called once.
func (s *Scheduler) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("scheduler: Run called twice")
	}
	defer s.shutdown()
	c := s.core
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		s.absorb()
		if err := ctx.Err(); err != nil {
			return err
		}
		now := time.Now()
		c.expire(now)
		seqs, samplers := c.plan(ctx, now)
		if len(seqs) == 0 {
			s.publish()
			var timerC <-chan time.Time
			if d, ok := c.nextWake(now, s.cfg.CapacityRetry); ok {
				timer.Reset(d)
				timerC = timer.C
			}
			select {
			case sq := <-s.submitc:
				c.submit(sq)
			case sq := <-s.cancelc:
				s.absorbSubmits()
				c.cancel(sq, time.Now())
			case <-timerC:
			case <-s.wake:
			case <-ctx.Done():
			}
			timer.Stop()
			continue
		}
		if s.verifier != nil {
			rows, err := s.verifier.StepDrafts(ctx, seqs, samplers)
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			c.applyRows(rows, err, time.Now())
		} else {
			results, err := s.model.Step(ctx, seqs, samplers)
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			c.apply(results, err, time.Now())
		}
		if s.afterStep != nil {
			s.afterStep(c)
		}
		s.publish()
		// Let the streams' readers just made ready run now: they sit in
		// this goroutine's run queue, and a loop that never blocks (a
		// small model steps in tens of microseconds) could otherwise
		// finish a whole reply before they are scheduled, and the client
		// would get it in one message instead of token by token.
		goruntime.Gosched()
	}
}

// absorb takes every pending submission and cancellation without blocking.
func (s *Scheduler) absorb() {
	for {
		select {
		case sq := <-s.submitc:
			s.core.submit(sq)
		case sq := <-s.cancelc:
			s.absorbSubmits()
			s.core.cancel(sq, time.Now())
		default:
			return
		}
	}
}

func (s *Scheduler) absorbSubmits() {
	for {
		select {
		case sq := <-s.submitc:
			s.core.submit(sq)
		default:
			return
		}
	}
}

func (s *Scheduler) publish() {
	draining := s.draining.Load()
	st := s.core.snapshot(draining)
	s.stats.Store(&st)
	if draining && s.core.live == 0 && s.queued.Load() == 0 {
		s.drainOnce.Do(func() { close(s.drained) })
	}
}

// shutdown ends every request in flight with ErrClosed.
func (s *Scheduler) shutdown() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	close(s.done)
	s.absorbSubmits()
	s.core.closeAll(ErrClosed, time.Now())
	s.publish()
	s.drainOnce.Do(func() { close(s.drained) })
}
