package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// core is the synchronous scheduler: admit, plan, apply. Plain methods, no
// goroutines, no clock (time is passed in). The Run loop owns it.
//
// This file holds the state and what every batching mode shares: submit,
// cancel, apply and finish. Planning a step is the policy's (plan.go for
// continuous batching, static.go for static groups); what a sampled token
// does to a stream is output.go's.
type core struct {
	cfg    Config
	pool   *blockPool
	policy policy

	waiting []*seq // sorted by waitLess: priority desc, then submission order
	running []*seq // sorted by runLess: priority desc, then first admission
	live    int    // received and not done: len(waiting) + len(running)

	entries  []entry           // the planned step, one per real row of batch
	batch    []batch.SeqStep   // entries' rows, then the policy's padding rows
	samplers []*sample.Sampler // samplers[k] goes with batch[k] (nil when !batch[k].Logits)
	budget   int
	planNo   uint64
	rankSeq  uint64
	hits     [][]int32 // scratch for prefix lookups, one table per group
	// hidden backs the Hidden rows of the step's embedding entries.
	hidden []float32

	// queued counts requests submitted but never admitted (Submit's bound);
	// shared with Submit, which increments it.
	queued *atomic.Int64

	paused      bool
	pauseReason string
	stats       Stats

	// drafts is set when the step speculates (Config.Spec on and the
	// model verifies drafts); one holds apply's results as rows.
	drafts bool
	// draftReqs and draftAt are planDrafts' requests to the Drafter and
	// the index of each one's entry (reused).
	draftReqs []batch.DraftRequest
	draftAt   []int
	one       [][]sample.Result
}

// policy is what differs between batching modes. The core calls it at these
// points only, so the continuous path carries no trace of static padding.
type policy interface {
	// plan fills c.entries for the next step, under c.budget and
	// Config.MaxSeqs, admitting and preempting as the mode allows.
	plan(c *core, now time.Time)
	// pad appends the step's padding rows and their samplers after the
	// planned ones: rows a fixed-shape batch computes whose output is
	// discarded.
	pad(rows []batch.SeqStep, samplers []*sample.Sampler) ([]batch.SeqStep, []*sample.Sampler)
	// padded accounts for the padding rows of a step that ran.
	padded(c *core)
	// ending is told that sq, running, ends with reason before its blocks
	// go back; it says whether sq's Final is held back.
	ending(c *core, sq *seq, reason FinishReason) (hold bool)
	// settle runs after every step and event: held Finals whose time has
	// come are delivered.
	settle(c *core)
}

func newCore(cfg Config, queued *atomic.Int64) *core {
	c := &core{
		cfg:    cfg,
		pool:   newBlockPool(cfg.ledgerBlocks(), cfg.BlockSize),
		queued: queued,
	}
	if cfg.Batching == BatchingStatic {
		c.policy = newStaticPolicy(cfg)
	} else {
		c.policy = continuous{}
	}
	return c
}

func waitLess(a, b *seq) bool {
	if a.req.Priority != b.req.Priority {
		return a.req.Priority > b.req.Priority
	}
	return a.id < b.id
}

func runLess(a, b *seq) bool {
	if a.req.Priority != b.req.Priority {
		return a.req.Priority > b.req.Priority
	}
	return a.rank < b.rank
}

func (c *core) insertWaiting(sq *seq) {
	i := sort.Search(len(c.waiting), func(i int) bool { return waitLess(sq, c.waiting[i]) })
	c.waiting = slices.Insert(c.waiting, i, sq)
	sq.state = seqWaiting
}

func (c *core) insertRunning(sq *seq) {
	i := sort.Search(len(c.running), func(i int) bool { return runLess(sq, c.running[i]) })
	c.running = slices.Insert(c.running, i, sq)
	sq.state = seqRunning
}

func removeSeq(list []*seq, sq *seq) []*seq {
	if i := slices.Index(list, sq); i >= 0 {
		return slices.Delete(list, i, i+1)
	}
	return list
}

// submit takes in a sequence Submit created.
func (c *core) submit(sq *seq) {
	c.insertWaiting(sq)
	c.live++
}

// cancel ends a sequence at the client's request, in whatever phase it is.
func (c *core) cancel(sq *seq, now time.Time) {
	switch sq.state {
	case seqWaiting, seqRunning:
		c.finish(sq, FinishCancelled, Event{}, "", nil, now)
		c.policy.settle(c)
	}
}

// expire fails waiting requests whose QueueTimeout has passed.
func (c *core) expire(now time.Time) {
	for i := 0; i < len(c.waiting); {
		sq := c.waiting[i]
		if !sq.admitted && !sq.deadline.IsZero() && !now.Before(sq.deadline) {
			c.finish(sq, FinishTimeout, Event{}, "", nil, now)
			continue
		}
		i++
	}
}

// nextWake says when the idle loop must look again without an event: the
// earliest queue deadline, or a capacity retry. ok is false: never.
func (c *core) nextWake(now time.Time, retry time.Duration) (d time.Duration, ok bool) {
	var at time.Time
	for _, sq := range c.waiting {
		if !sq.admitted && !sq.deadline.IsZero() && (at.IsZero() || sq.deadline.Before(at)) {
			at = sq.deadline
		}
	}
	if !at.IsZero() {
		d, ok = max(at.Sub(now), 0), true
	}
	if len(c.waiting) > 0 && c.paused && (!ok || retry < d) {
		d, ok = retry, true
	}
	if len(c.waiting) > 0 && c.waiting[0].noAdmit >= c.planNo {
		d, ok = 0, true
	}
	return d, ok
}

// blocksFor is the number of blocks that hold n positions.
func (c *core) blocksFor(n int) int { return (n + c.cfg.BlockSize - 1) / c.cfg.BlockSize }

// plan builds the next step's batch and the sampler of each row that asks
// for logits: the policy's entries, each feeding its sequence the next
// slice of its history, then the policy's padding rows. An empty batch
// means there is nothing to do until an event arrives.
func (c *core) plan(ctx context.Context, now time.Time) ([]batch.SeqStep, []*sample.Sampler) {
	c.planNo++
	c.entries = c.entries[:0]
	c.budget = c.cfg.MaxBatchTokens
	c.policy.plan(c, now)
	if c.drafts {
		// Speculation is continuous batching's alone (SpecConfig.validate).
		c.planDrafts(ctx)
	}
	// Drop the entries of sequences preempted after they were planned, so
	// entries[k] is the sequence of batch[k].
	c.entries = slices.DeleteFunc(c.entries, func(e entry) bool { return e.dropped })
	c.batch, c.samplers = c.batch[:0], c.samplers[:0]
	W := c.cfg.embedDim
	embedTokens := 0
	for _, e := range c.entries {
		if e.sq.pool != nil {
			embedTokens += e.n
		}
	}
	if len(c.hidden) < embedTokens*W {
		c.hidden = make([]float32, embedTokens*W)
	}
	hid := c.hidden
	for _, e := range c.entries {
		toks := e.sq.tokens[e.sq.computed : e.sq.computed+e.n]
		if e.draft > 0 {
			toks = e.sq.spec.row
		}
		var h []float32
		if e.sq.pool != nil {
			h, hid = hid[:e.n*W:e.n*W], hid[e.n*W:]
		}
		row := batch.SeqStep{
			Seq:    e.sq.id,
			Tokens: toks,
			Pos:    e.sq.computed,
			Logits: e.sample,
			Draft:  e.draft,
			Hidden: h,
		}
		if c.cfg.KVWindows == nil {
			row.Blocks = e.sq.tables[0]
		} else {
			row.Tables = e.sq.tables
		}
		c.batch = append(c.batch, row)
		var smp *sample.Sampler
		if e.sample {
			smp = e.sq.sampler
		}
		c.samplers = append(c.samplers, smp)
	}
	c.batch, c.samplers = c.policy.pad(c.batch, c.samplers)
	return c.batch, c.samplers
}

// apply takes the step's results, one token per row (Model.Step): see
// applyRows.
func (c *core) apply(results []sample.Result, err error, now time.Time) {
	c.one = c.one[:0]
	for k := range results {
		c.one = append(c.one, results[k:k+1])
	}
	c.applyRows(c.one, err, now)
}

// applyRows takes the step's results, the tokens of each row (one, or the
// accepted drafts and the token after them: Verifier.StepDrafts): it
// advances every planned sequence, registers newly full blocks in the
// prefix cache, and handles the sampled tokens, finishing sequences (and
// freeing their blocks) as they end. Results past the planned entries
// belong to padding rows and are dropped.
func (c *core) applyRows(results [][]sample.Result, err error, now time.Time) {
	// A batch.StepErrors fails only the sequences it lists; any other
	// error fails the whole batch (but not the scheduler).
	var seqErrs batch.StepErrors
	if err != nil && errors.As(err, &seqErrs) && len(results) >= len(c.batch) {
		err = nil
	} else {
		seqErrs = nil
	}
	if err == nil && len(results) < len(c.batch) {
		err = fmt.Errorf("model returned %d results for %d sequences", len(results), len(c.batch))
	}
	if err != nil {
		err = fmt.Errorf("scheduler: step: %w", err)
		for _, e := range c.entries {
			if e.sq.state == seqRunning {
				c.finish(e.sq, FinishError, Event{}, "", err, now)
			}
		}
		c.entries = c.entries[:0]
		c.policy.settle(c)
		return
	}
	c.stats.Steps++
	c.stats.LastBatchTokens, c.stats.LastPrefillTok, c.stats.LastDecodeTok = 0, 0, 0
	c.stats.LastPaddingTok = 0
	c.policy.padded(c)
	for k, e := range c.entries {
		sq := e.sq
		if sq.state != seqRunning {
			continue
		}
		c.stats.LastBatchTokens += e.n
		if e.decode {
			c.stats.LastDecodeTok += e.n
		} else {
			c.stats.LastPrefillTok += e.n
			c.stats.PromptTokens += uint64(e.n)
		}
		if seqErrs != nil && seqErrs.Failed(k) {
			for _, se := range seqErrs {
				if se.Index == k {
					err = fmt.Errorf("scheduler: step: %w", se)
				}
			}
			c.finish(sq, FinishError, Event{}, "", err, now)
			continue
		}
		if e.sample && len(results[k]) == 0 {
			c.finish(sq, FinishError, Event{}, "", fmt.Errorf("scheduler: step: model returned no token for sequence %d", sq.id), now)
			continue
		}
		if e.draft > 0 {
			c.applyDrafts(sq, e, results[k], now)
			continue
		}
		sq.computed += e.n
		c.registerFull(sq)
		c.slide(sq)
		if sq.pool != nil {
			sq.pool.Add(c.batch[k].Hidden)
			if sq.computed == sq.promptLen {
				c.finish(sq, FinishEmbedded, Event{}, "", nil, now)
			}
			continue
		}
		if e.sample {
			sq.prefilled = true
			c.onToken(sq, results[k][0], now)
		}
	}
	c.entries = c.entries[:0]
	c.policy.settle(c)
}

// registerFull offers sq's newly completed blocks to the prefix cache
// (not an embedding request's: its blocks go straight back to the free
// list when it ends, leaving cached prefixes of chats in place).
func (c *core) registerFull(sq *seq) {
	if c.cfg.DisablePrefixCache || sq.pool != nil {
		return
	}
	bs := c.cfg.BlockSize
	full := sq.computed / bs
	for i := sq.registered; i < full; i++ {
		h, parent, toks := sq.blockHash(i, bs), sq.parentHash(i, bs), sq.tokens[i*bs:(i+1)*bs]
		for g, t := range sq.tables {
			if t[i] >= 0 {
				c.pool.register(t[i], groupKey(h, g), groupKey(parent, g), toks)
			}
		}
	}
	sq.registered = max(sq.registered, full)
}

// finish ends sq: it leaves the queue or the running set, gives its blocks
// back, and its stream gets ev with Final, unless the policy holds the
// Final back (then ev goes now and the Final later).
func (c *core) finish(sq *seq, reason FinishReason, ev Event, matched string, err error, now time.Time) {
	hold := false
	switch sq.state {
	case seqRunning:
		hold = c.policy.ending(c, sq, reason) // before its blocks go
		c.running = removeSeq(c.running, sq)
		c.releaseBlocks(sq)
	case seqWaiting:
		c.waiting = removeSeq(c.waiting, sq)
		if !sq.admitted {
			c.queued.Add(-1)
		}
	case seqDone:
		return
	}
	if sq.state != seqNew {
		c.live--
	}
	sq.state = seqDone
	f := &Final{
		Reason:           reason,
		PromptTokens:     sq.promptLen,
		CompletionTokens: sq.generated,
		CachedTokens:     sq.cached,
		Err:              err,
		StopMatched:      matched,
		DraftTokens:      sq.spec.drafted,
		AcceptedTokens:   sq.spec.accepted,
	}
	if reason == FinishEmbedded {
		f.Embedding = sq.pool.Vector()
	}
	if sq.admitted {
		f.QueueWait = sq.admittedAt.Sub(sq.submitted)
	} else {
		f.QueueWait = now.Sub(sq.submitted)
	}
	if sq.generated > 0 {
		f.TTFT = sq.firstTokAt.Sub(sq.submitted)
	}
	sq.stopAfter()
	sq.st.cancel()
	if hold {
		sq.final = f
		if len(ev.Tokens) > 0 || ev.Text != "" {
			sq.st.push(ev)
		}
		return
	}
	ev.Final = f
	sq.st.push(ev)
}

// closeAll ends every sequence with err (the scheduler is stopping).
func (c *core) closeAll(err error, now time.Time) {
	for len(c.running) > 0 {
		c.finish(c.running[0], FinishError, Event{}, "", err, now)
	}
	for len(c.waiting) > 0 {
		c.finish(c.waiting[0], FinishError, Event{}, "", err, now)
	}
	c.policy.settle(c) // held Finals are delivered as they were
}

// snapshot returns the current Stats.
func (c *core) snapshot(draining bool) Stats {
	s := c.stats
	s.Running = len(c.running)
	s.Waiting = len(c.waiting)
	s.KVBlocksTotal = c.pool.total()
	s.KVBlocksUsed = c.pool.used
	s.KVBlocksCached = c.pool.lruLen
	s.KVBlocksFree = len(c.pool.free)
	s.KVBlocksReserved = c.cfg.scratchBlocks()
	s.AdmissionPaused = c.paused
	s.AdmissionPausedReason = c.pauseReason
	s.Draining = draining
	return s
}
