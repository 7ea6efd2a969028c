package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// entry is one sequence's share of the planned step.
type entry struct {
	sq      *seq
	n       int        // tokens fed: sq.tokens[sq.computed : sq.computed+n]
	sample  bool       // the chunk ends at the last known token: sample the next
	decode  bool       // a decode token (not prompt or recompute)
	dropped bool       // the sequence was preempted after being planned
	pad     *padRow    // static mode: a padding row for an ended member (sq)
	ppad    *promptPad // static mode: prompt padding of a short member (sq)
}

// promptPad is the prompt padding of a static group member whose prompt is
// shorter than the group's longest: a real [B, T] batch computes T positions
// for every row at prefill, so the shortfall is computed as a separate row of
// need tokens (the member's first token repeated, positions 0..need-1) on
// its own scratch block, with no logits; its output is discarded. Decode
// padding rows never run in the same step (they wait for the prefill to
// end), so the two kinds can share the scratch blocks.
type promptPad struct {
	sq     *seq
	done   int
	toks   []int32 // need tokens
	blocks []int32
	block  int32
}

// padRow is the batch row of a static group member that has ended while its
// group runs on. A static batch has a fixed shape, so the row is still
// computed every decode step: one token (the member's last) at a position
// that grows by one per step, attending over all earlier positions, with
// logits sampled by a throwaway greedy sampler. Its K/V go to the row's own
// scratch block (every entry of its block table is that block), outside the
// ledger; the writes overwrite each other, which is harmless because the
// output is discarded. One block per row keeps rows from writing the same
// memory.
type padRow struct {
	sq      *seq
	tok     int32
	pos     int
	blocks  []int32
	sampler *sample.Sampler
}

// core is the synchronous scheduler: admit, plan, apply. Plain methods, no
// goroutines, no clock (time is passed in). The Run loop owns it.
type core struct {
	cfg  Config
	pool *blockPool

	waiting []*seq       // sorted by waitLess: priority desc, then submission order
	running []*seq       // sorted by runLess: priority desc, then first admission
	group   []*seq       // static mode: the current group, finished members included
	pads    []*padRow    // static mode: rows of the group's ended members
	ppads   []*promptPad // static mode: prompt padding of the group's short members
	scratch int32        // static mode: first scratch block (ids scratch.. are outside the ledger)
	live    int          // received and not done: len(waiting) + len(running)

	entries  []entry
	batch    []batch.SeqStep
	samplers []*sample.Sampler // samplers[k] goes with batch[k] (nil when !batch[k].Logits)
	budget   int
	planNo   uint64
	rankSeq  uint64
	hits     []int32 // scratch for prefix lookups

	// queued counts requests submitted but never admitted (Submit's bound);
	// shared with Submit, which increments it.
	queued *atomic.Int64

	paused      bool
	pauseReason string
	stats       Stats
}

func newCore(cfg Config, queued *atomic.Int64) *core {
	return &core{
		cfg:     cfg,
		pool:    newBlockPool(cfg.ledgerBlocks(), cfg.BlockSize),
		scratch: int32(cfg.ledgerBlocks()),
		queued:  queued,
	}
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
		c.maybeEndGroup()
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

func (c *core) releaseBlocks(sq *seq) {
	for _, b := range sq.blocks {
		c.pool.release(b)
	}
	sq.blocks = sq.blocks[:0]
	sq.registered = 0
}

func (c *core) addEntry(sq *seq, n int, now time.Time) {
	decode := n == 1 && sq.remaining() == 1 && sq.generated > 0 && sq.computed >= sq.promptLen
	c.entries = append(c.entries, entry{sq: sq, n: n, sample: sq.computed+n == len(sq.tokens), decode: decode})
	c.budget -= n
}

// preempt gives running[j]'s blocks back and re-queues it for recompute:
// its history (prompt + generated) is fed again when it is readmitted, and
// its sampler carries on where it was.
func (c *core) preempt(j int) {
	sq := c.running[j]
	c.running = slices.Delete(c.running, j, j+1)
	for k := range c.entries {
		if e := &c.entries[k]; e.sq == sq && !e.dropped {
			e.dropped = true
			c.budget += e.n
		}
	}
	c.releaseBlocks(sq)
	sq.computed = 0
	sq.noAdmit = c.planNo
	c.insertWaiting(sq)
	c.stats.Preemptions++
}

// grow gives running[i] blocks for want positions, preempting the lowest
// ranked sequences after it (lowest priority, most recently admitted) when
// the pool is empty. When none is left below it, it preempts running[i]
// itself when self is set, and returns false.
func (c *core) grow(i, want int, self bool) bool {
	sq := c.running[i]
	for len(sq.blocks)*c.cfg.BlockSize < want {
		if b, ok := c.pool.alloc(); ok {
			sq.blocks = append(sq.blocks, b)
			continue
		}
		if j := len(c.running) - 1; j > i {
			c.preempt(j)
			continue
		}
		if self {
			c.preempt(i)
		}
		return false
	}
	return true
}

// plan builds the next step's batch and the sampler of each row that asks
// for logits. An empty batch means there is nothing to do until an event
// arrives.
func (c *core) plan(now time.Time) ([]batch.SeqStep, []*sample.Sampler) {
	c.planNo++
	c.entries = c.entries[:0]
	c.budget = c.cfg.MaxBatchTokens
	if c.cfg.Batching == BatchingStatic {
		c.planStatic(now)
	} else {
		c.planContinuous(now)
	}
	c.batch = c.batch[:0]
	c.samplers = c.samplers[:0]
	for _, e := range c.entries {
		if e.dropped {
			continue
		}
		if pp := e.ppad; pp != nil {
			c.batch = append(c.batch, batch.SeqStep{
				Seq:    pp.sq.id,
				Tokens: pp.toks[pp.done : pp.done+e.n],
				Pos:    pp.done,
				Blocks: pp.blocks,
			})
			c.samplers = append(c.samplers, nil)
			continue
		}
		if p := e.pad; p != nil {
			c.batch = append(c.batch, batch.SeqStep{
				Seq:    p.sq.id,
				Tokens: []int32{p.tok},
				Pos:    p.pos,
				Blocks: p.blocks,
				Logits: true,
			})
			c.samplers = append(c.samplers, p.sampler)
			continue
		}
		st := batch.SeqStep{
			Seq:    e.sq.id,
			Tokens: e.sq.tokens[e.sq.computed : e.sq.computed+e.n],
			Pos:    e.sq.computed,
			Blocks: e.sq.blocks,
			Logits: e.sample,
		}
		var smp *sample.Sampler
		if e.sample {
			smp = e.sq.sampler
		}
		c.batch = append(c.batch, st)
		c.samplers = append(c.samplers, smp)
	}
	// Compact so entries[k] matches batch[k].
	c.entries = slices.DeleteFunc(c.entries, func(e entry) bool { return e.dropped })
	return c.batch, c.samplers
}

func (c *core) planContinuous(now time.Time) {
	// 1. One decode token for every running sequence that is decoding.
	for i := 0; i < len(c.running) && c.budget > 0; {
		sq := c.running[i]
		if sq.remaining() != 1 {
			i++
			continue
		}
		if !c.grow(i, sq.computed+1, true) {
			continue // running[i] was preempted; the next one moved up
		}
		c.addEntry(sq, 1, now)
		i++
	}
	// 2. Prompt (or recompute) chunks of admitted sequences.
	for i := 0; i < len(c.running) && c.budget > 0; i++ {
		sq := c.running[i]
		if sq.remaining() <= 1 {
			continue
		}
		if n := c.growChunk(i, min(sq.remaining(), c.budget)); n > 0 {
			c.addEntry(sq, n, now)
		}
	}
	// 3. Admit waiting requests, strictly in queue order.
	c.paused, c.pauseReason = false, ""
	for len(c.waiting) > 0 && len(c.running) < c.cfg.MaxSeqs && c.budget > 0 {
		if !c.admit(c.waiting[0], now) {
			break
		}
	}
}

// growChunk finds blocks for up to n more tokens of running[i]'s prefill and
// returns how many fit. It shrinks the chunk rather than preempt; it
// preempts lower-ranked sequences only when not one token fits.
func (c *core) growChunk(i, n int) int {
	sq := c.running[i]
	bs := c.cfg.BlockSize
	want := c.blocksFor(sq.computed + n)
	for len(sq.blocks) < want {
		if b, ok := c.pool.alloc(); ok {
			sq.blocks = append(sq.blocks, b)
			continue
		}
		if len(sq.blocks)*bs > sq.computed {
			break
		}
		if j := len(c.running) - 1; j > i {
			c.preempt(j)
			continue
		}
		return 0
	}
	return min(n, len(sq.blocks)*bs-sq.computed)
}

// prefixHits looks up the longest cached prefix of sq's history in full
// blocks, never covering the last token (its logits must be computed), and
// leaves the blocks in c.hits without taking them.
func (c *core) prefixHits(sq *seq) []int32 {
	c.hits = c.hits[:0]
	if c.cfg.DisablePrefixCache {
		return c.hits
	}
	bs := c.cfg.BlockSize
	for i := range (len(sq.tokens) - 1) / bs {
		b, ok := c.pool.lookup(sq.blockHash(i, bs), sq.parentHash(i, bs), sq.tokens[i*bs:(i+1)*bs])
		if !ok {
			break
		}
		c.hits = append(c.hits, b)
	}
	return c.hits
}

// gate asks the optional Capacity whether new blocks may be taken.
func (c *core) gate() bool {
	if c.cfg.Capacity == nil {
		return true
	}
	ok, reason := c.cfg.Capacity.AdmitOK()
	if !ok {
		c.paused, c.pauseReason = true, reason
	}
	return ok
}

// take admits sq (the head of the waiting queue) with the prefix hits and
// need new blocks. The caller has checked that they are available.
func (c *core) take(sq *seq, hits []int32, need int, now time.Time) {
	c.waiting = slices.Delete(c.waiting, 0, 1)
	for _, b := range hits {
		c.pool.acquire(b)
	}
	sq.blocks = append(sq.blocks[:0], hits...)
	for range need {
		b, ok := c.pool.alloc()
		if !ok {
			panic("scheduler: admission checked blocks that alloc does not have")
		}
		sq.blocks = append(sq.blocks, b)
	}
	sq.computed = len(hits) * c.cfg.BlockSize
	sq.registered = len(hits)
	if !sq.admitted {
		sq.admitted = true
		sq.admittedAt = now
		sq.cached = sq.computed
		sq.rank = c.rankSeq
		c.rankSeq++
		c.queued.Add(-1)
	}
	c.insertRunning(sq)
}

// cachedAmong counts the blocks of hits that sit on the LRU list (taking
// them makes them unavailable to alloc).
func (c *core) cachedAmong(hits []int32) int {
	n := 0
	for _, b := range hits {
		if c.pool.state[b] == blockCached {
			n++
		}
	}
	return n
}

// admit tries to admit the head of the waiting queue with its first chunk.
func (c *core) admit(sq *seq, now time.Time) bool {
	if sq.noAdmit >= c.planNo {
		return false // preempted in this very step: no thrash
	}
	bs := c.cfg.BlockSize
	hits := c.prefixHits(sq)
	done := len(hits) * bs
	n := min(len(sq.tokens)-done, c.budget)
	need := c.blocksFor(done+n) - len(hits)
	if need > 0 && !c.gate() {
		return false
	}
	wm := c.cfg.WatermarkBlocks
	if len(c.running) == 0 {
		wm = 0
	}
	if need+wm > c.pool.available()-c.cachedAmong(hits) {
		return false
	}
	c.take(sq, hits, need, now)
	c.addEntry(sq, n, now)
	return true
}

// planStatic runs fixed groups: prefill the whole group, then decode it
// together until its last member finishes. Blocks for each member's whole
// run are reserved at admission, so static mode never preempts.
func (c *core) planStatic(now time.Time) {
	c.paused, c.pauseReason = false, ""
	if len(c.group) == 0 {
		for len(c.waiting) > 0 && len(c.group) < c.cfg.BatchSize {
			sq := c.waiting[0]
			hits := c.prefixHits(sq)
			total := min(len(sq.tokens)+sq.req.MaxTokens-sq.generated, c.cfg.ContextLen)
			need := c.blocksFor(total) - len(hits)
			if need > 0 && !c.gate() {
				break
			}
			if need > c.pool.available()-c.cachedAmong(hits) {
				break
			}
			c.take(sq, hits, need, now)
			sq.inGroup = true
			c.group = append(c.group, sq)
		}
		c.startPromptPads()
	}
	prefilling := false
	for _, sq := range c.running {
		if !sq.prefilled {
			prefilling = true
			break
		}
	}
	for _, pp := range c.ppads {
		if pp.done < len(pp.toks) {
			prefilling = true
			break
		}
	}
	for _, sq := range c.running {
		if c.budget <= 0 {
			break
		}
		switch {
		case prefilling && !sq.prefilled:
			c.addEntry(sq, min(sq.remaining(), c.budget), now)
		case !prefilling:
			c.addEntry(sq, 1, now)
		}
	}
	// Prefill steps compute the prompt padding too, after the prompts.
	if prefilling && len(c.running) > 0 {
		for _, pp := range c.ppads {
			if c.budget <= 0 {
				break
			}
			if n := min(len(pp.toks)-pp.done, c.budget); n > 0 {
				for len(pp.blocks)*c.cfg.BlockSize < pp.done+n {
					pp.blocks = append(pp.blocks, pp.block)
				}
				c.entries = append(c.entries, entry{sq: pp.sq, n: n, ppad: pp})
				c.budget -= n
			}
		}
	}
	// Decode steps keep the group's shape: ended members still take their
	// row (BatchSize <= MaxBatchTokens, so the budget always holds them).
	if !prefilling && len(c.running) > 0 {
		for _, p := range c.pads {
			if c.budget <= 0 {
				break
			}
			c.padTable(p)
			c.entries = append(c.entries, entry{sq: p.sq, n: 1, sample: true, pad: p})
			c.budget--
		}
	}
}

// startPromptPads sets up the prompt padding of a new group's members whose
// prompts are shorter than its longest; they are at most len(group)-1, so
// each gets its own scratch block.
func (c *core) startPromptPads() {
	longest := 0
	for _, sq := range c.group {
		longest = max(longest, sq.promptLen)
	}
	for _, sq := range c.group {
		need := longest - sq.promptLen
		if need == 0 {
			continue
		}
		toks := make([]int32, need)
		for i := range toks {
			toks[i] = sq.tokens[0]
		}
		c.ppads = append(c.ppads, &promptPad{sq: sq, toks: toks, block: c.scratch + int32(len(c.ppads))})
	}
}

// startPad gives sq, a group member that just ended while others of its
// group still run, a padding row on the next free scratch block. Rows are
// only freed when the group ends, and at most len(group)-1 members can end
// while another runs, so BatchSize-1 scratch blocks always suffice.
func (c *core) startPad(sq *seq) {
	slot := len(c.pads)
	if slot >= c.cfg.scratchBlocks() {
		panic("scheduler: static group has more padding rows than scratch blocks")
	}
	tok := sq.tokens[len(sq.tokens)-1]
	c.pads = append(c.pads, &padRow{
		sq:      sq,
		tok:     tok,
		pos:     min(sq.computed, c.cfg.ContextLen-1),
		sampler: sample.New(sample.Params{}, nil),
	})
}

// padTable makes p's block table cover its next position with its scratch
// block.
func (c *core) padTable(p *padRow) {
	b := c.scratch + int32(slices.Index(c.pads, p))
	for len(p.blocks)*c.cfg.BlockSize < p.pos+1 {
		p.blocks = append(p.blocks, b)
	}
}

// groupRunning says whether a member of the static group other than sq is
// still running.
func (c *core) groupRunning(sq *seq) bool {
	for _, m := range c.group {
		if m != sq && m.state == seqRunning {
			return true
		}
	}
	return false
}

// maybeEndGroup delivers the held answers of a static group once none of
// its members runs any more.
func (c *core) maybeEndGroup() {
	if len(c.group) == 0 {
		return
	}
	for _, sq := range c.group {
		if sq.state != seqDone {
			return
		}
	}
	for _, sq := range c.group {
		if sq.final != nil {
			sq.st.push(Event{Final: sq.final})
			sq.final = nil
		}
		sq.inGroup = false
	}
	c.group = c.group[:0]
	clear(c.pads)
	c.pads = c.pads[:0]
	clear(c.ppads)
	c.ppads = c.ppads[:0]
}

// apply takes the step's results: it advances every planned sequence,
// registers newly full blocks in the prefix cache, and handles the sampled
// tokens, finishing sequences (and freeing their blocks) as they end.
func (c *core) apply(results []sample.Result, err error, now time.Time) {
	// A batch.StepErrors fails only the sequences it lists; any other
	// error fails the whole batch (but not the scheduler).
	var seqErrs batch.StepErrors
	if err != nil && errors.As(err, &seqErrs) && len(results) >= len(c.entries) {
		err = nil
	} else {
		seqErrs = nil
	}
	if err == nil && len(results) < len(c.entries) {
		err = fmt.Errorf("model returned %d results for %d sequences", len(results), len(c.entries))
	}
	if err != nil {
		err = fmt.Errorf("scheduler: step: %w", err)
		for _, e := range c.entries {
			if e.sq.state == seqRunning {
				c.finish(e.sq, FinishError, Event{}, "", err, now)
			}
		}
		c.entries = c.entries[:0]
		c.maybeEndGroup()
		return
	}
	c.stats.Steps++
	c.stats.LastBatchTokens, c.stats.LastPrefillTok, c.stats.LastDecodeTok = 0, 0, 0
	c.stats.LastPaddingTok = 0
	for k, e := range c.entries {
		if pp := e.ppad; pp != nil {
			c.stats.LastBatchTokens += e.n
			c.stats.LastPaddingTok += e.n
			c.stats.PaddingTokens += uint64(e.n)
			pp.done += e.n
			continue
		}
		if p := e.pad; p != nil {
			// Padding: its sampled token and any error are discarded.
			c.stats.LastBatchTokens++
			c.stats.LastPaddingTok++
			c.stats.PaddingTokens++
			p.pos = min(p.pos+1, c.cfg.ContextLen-1)
			continue
		}
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
		sq.computed += e.n
		c.registerFull(sq)
		if e.sample {
			sq.prefilled = true
			c.onToken(sq, results[k], now)
		}
	}
	c.entries = c.entries[:0]
	c.maybeEndGroup()
}

// registerFull offers sq's newly completed blocks to the prefix cache.
func (c *core) registerFull(sq *seq) {
	if c.cfg.DisablePrefixCache {
		return
	}
	bs := c.cfg.BlockSize
	full := sq.computed / bs
	for i := sq.registered; i < full; i++ {
		c.pool.register(sq.blocks[i], sq.blockHash(i, bs), sq.parentHash(i, bs), sq.tokens[i*bs:(i+1)*bs])
	}
	sq.registered = max(sq.registered, full)
}

// onToken appends a sampled token to sq and applies the stop conditions.
func (c *core) onToken(sq *seq, res sample.Result, now time.Time) {
	tok := res.Token
	sq.tokens = append(sq.tokens, tok)
	sq.generated++
	c.stats.GenerationTokens++
	if sq.generated == 1 {
		sq.firstTokAt = now
	}
	ev := Event{Tokens: []Token{{ID: tok, Logprob: res.Logprob, Top: res.Top}}}
	active := sq.stopActive()
	reason, matched, byString := FinishNone, "", false
	switch {
	case active && slices.Contains(sq.req.StopTokenIDs, tok):
		reason, matched = FinishStopSequence, c.pieceText(tok)
	case active && !sq.req.IgnoreEOS && c.cfg.IsEOG != nil && c.cfg.IsEOG(tok):
		reason = FinishEOS
	case sq.dec != nil:
		if m, ok := sq.addText(&ev, sq.dec.Add(tok), false, active); ok {
			reason, matched, byString = FinishStopSequence, m, true
		}
	}
	if reason == FinishNone && (sq.generated >= sq.req.MaxTokens || len(sq.tokens) >= c.cfg.ContextLen) {
		reason = FinishLength
	}
	if reason == FinishNone {
		sq.st.push(ev)
		return
	}
	if !byString && sq.dec != nil {
		if m, ok := sq.addText(&ev, sq.dec.Flush(), true, active); ok {
			reason, matched = FinishStopSequence, m
		}
	}
	c.finish(sq, reason, ev, matched, nil, now)
}

// pieceText is the text of one token on its own (for Final.StopMatched).
func (c *core) pieceText(tok int32) string {
	if c.cfg.NewDecoder == nil {
		return strconv.Itoa(int(tok))
	}
	d := c.cfg.NewDecoder()
	return d.Add(tok) + d.Flush()
}

// finish ends sq: it leaves the queue or the running set, gives its blocks
// back, and its stream gets ev with Final (held until the group ends for a
// static group member that finished normally).
func (c *core) finish(sq *seq, reason FinishReason, ev Event, matched string, err error, now time.Time) {
	switch sq.state {
	case seqRunning:
		if sq.inGroup && c.groupRunning(sq) {
			c.startPad(sq) // before its blocks go: it reads sq.computed
		}
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
	if sq.inGroup && reason != FinishCancelled && reason != FinishError {
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
	c.maybeEndGroup() // members that finished get their real Final
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

// check verifies the core's invariants; tests call it after every step.
func (c *core) check() error {
	refs := make([]int32, c.pool.total())
	bs := c.cfg.BlockSize
	for i, sq := range c.running {
		if sq.state != seqRunning {
			return fmt.Errorf("running seq %d in state %d", sq.id, sq.state)
		}
		if i > 0 && runLess(sq, c.running[i-1]) {
			return fmt.Errorf("running set out of order at %d", i)
		}
		if sq.computed > len(sq.tokens) || len(sq.blocks)*bs < sq.computed {
			return fmt.Errorf("seq %d: computed %d of %d tokens with %d blocks", sq.id, sq.computed, len(sq.tokens), len(sq.blocks))
		}
		if sq.noAdmit >= c.planNo {
			return fmt.Errorf("seq %d readmitted in the plan that preempted it", sq.id)
		}
		if sq.registered > len(sq.blocks) {
			return fmt.Errorf("seq %d: %d registered of %d blocks", sq.id, sq.registered, len(sq.blocks))
		}
		seen := make(map[int32]bool, len(sq.blocks))
		for _, b := range sq.blocks {
			if seen[b] {
				return fmt.Errorf("seq %d holds block %d twice", sq.id, b)
			}
			seen[b] = true
			refs[b]++
		}
	}
	for i, sq := range c.waiting {
		if sq.state != seqWaiting || len(sq.blocks) != 0 || sq.computed != 0 {
			return fmt.Errorf("waiting seq %d: state %d, %d blocks, computed %d", sq.id, sq.state, len(sq.blocks), sq.computed)
		}
		if i > 0 && waitLess(sq, c.waiting[i-1]) {
			return fmt.Errorf("waiting queue out of order at %d", i)
		}
	}
	if c.live != len(c.running)+len(c.waiting) {
		return fmt.Errorf("live %d, running %d + waiting %d", c.live, len(c.running), len(c.waiting))
	}
	if len(c.running) > c.cfg.MaxSeqs {
		return fmt.Errorf("%d running, MaxSeqs %d", len(c.running), c.cfg.MaxSeqs)
	}
	if len(c.pads) > 0 && len(c.group) == 0 || len(c.pads) > c.cfg.scratchBlocks() {
		return fmt.Errorf("%d padding rows, group of %d, %d scratch blocks", len(c.pads), len(c.group), c.cfg.scratchBlocks())
	}
	for i, p := range c.pads {
		if p.sq.state != seqDone || !p.sq.inGroup || len(p.sq.blocks) != 0 {
			return fmt.Errorf("padding row %d: seq %d in state %d, in group %v, %d blocks", i, p.sq.id, p.sq.state, p.sq.inGroup, len(p.sq.blocks))
		}
		if p.pos >= c.cfg.ContextLen {
			return fmt.Errorf("padding row %d at position %d, context %d", i, p.pos, c.cfg.ContextLen)
		}
		for _, b := range p.blocks {
			if b != c.scratch+int32(i) {
				return fmt.Errorf("padding row %d holds block %d, its scratch block is %d", i, b, c.scratch+int32(i))
			}
		}
	}
	if len(c.ppads) > 0 && len(c.group) == 0 || len(c.ppads) > c.cfg.scratchBlocks() {
		return fmt.Errorf("%d prompt paddings, group of %d, %d scratch blocks", len(c.ppads), len(c.group), c.cfg.scratchBlocks())
	}
	for i, pp := range c.ppads {
		if pp.block != c.scratch+int32(i) || pp.done > len(pp.toks) || !pp.sq.inGroup {
			return fmt.Errorf("prompt padding %d of seq %d: block %d (scratch %d), %d of %d done", i, pp.sq.id, pp.block, c.scratch+int32(i), pp.done, len(pp.toks))
		}
		for _, b := range pp.blocks {
			if b != pp.block {
				return fmt.Errorf("prompt padding %d holds block %d, its scratch block is %d", i, b, pp.block)
			}
		}
	}
	if err := c.pool.check(refs); err != nil {
		return fmt.Errorf("kv ledger: %w", err)
	}
	return nil
}
