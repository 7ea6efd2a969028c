package scheduler

import (
	"slices"
	"time"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// entry is one sequence's share of the planned step.
type entry struct {
	sq      *seq
	n       int  // tokens fed: sq.tokens[sq.computed : sq.computed+n]
	sample  bool // the chunk ends at the last known token: sample the next
	decode  bool // a decode token (not prompt or recompute)
	dropped bool // the sequence was preempted after being planned
	// draft is the number of drafted tokens that follow the decode token
	// (n = 1 + draft; the row is sq.spec.row, not a slice of the history).
	draft int
}

// continuous is continuous batching: every step re-forms the batch from the
// running set and the head of the queue, with no padding.
type continuous struct{}

var _ policy = continuous{}

// plan fills the step decode-first: one token for every decoding sequence,
// then prompt chunks of admitted sequences, then the first chunks of
// waiting requests admitted strictly in queue order.
func (continuous) plan(c *core, now time.Time) {
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
		c.addEntry(sq, 1)
		i++
	}
	// 2. Prompt (or recompute) chunks of admitted sequences.
	for i := 0; i < len(c.running) && c.budget > 0; i++ {
		sq := c.running[i]
		if sq.remaining() <= 1 {
			continue
		}
		if n := c.growChunk(i, min(sq.remaining(), c.budget)); n > 0 {
			c.addEntry(sq, n)
		}
	}
	// 3. Admit waiting requests, strictly in queue order.
	c.paused, c.pauseReason = false, ""
	for len(c.waiting) > 0 && len(c.running) < c.cfg.MaxSeqs && c.budget > 0 {
		if !c.admit(c.waiting[0], now) {
			break
		}
	}
	// 4. Drafts for decoding sequences come last (core.plan: planDrafts):
	// they never take budget or blocks from anything above, and never
	// preempt.
}

func (continuous) pad(rows []batch.SeqStep, smps []*sample.Sampler) ([]batch.SeqStep, []*sample.Sampler) {
	return rows, smps
}

func (continuous) padded(*core)                                 {}
func (continuous) ending(*core, *seq, FinishReason) (hold bool) { return false }
func (continuous) settle(*core)                                 {}

// addEntry plans n tokens of sq's history for the step.
func (c *core) addEntry(sq *seq, n int) {
	decode := n == 1 && sq.remaining() == 1 && sq.generated > 0 && sq.computed >= sq.promptLen
	last := sq.pool == nil && sq.computed+n == len(sq.tokens) // an embedding samples nothing
	c.entries = append(c.entries, entry{sq: sq, n: n, sample: last, decode: decode})
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
	if sq.pool != nil {
		sq.pool.Reset() // its hidden states are computed again
	}
	sq.noAdmit = c.planNo
	c.insertWaiting(sq)
	c.stats.Preemptions++
}

// grow gives running[i] block rows for want positions, preempting the
// lowest ranked sequences after it (lowest priority, most recently
// admitted) when the pool runs out. When none is left below it, it
// preempts running[i] itself when self is set, and returns false.
func (c *core) grow(i, want int, self bool) bool {
	sq := c.running[i]
	for sq.rows()*c.cfg.BlockSize < want {
		if c.addRow(sq) {
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

// growChunk finds blocks for up to n more tokens of running[i]'s prefill and
// returns how many fit. It shrinks the chunk rather than preempt; it
// preempts lower-ranked sequences only when not one token fits.
func (c *core) growChunk(i, n int) int {
	sq := c.running[i]
	bs := c.cfg.BlockSize
	want := c.blocksFor(sq.computed + n)
	for sq.rows() < want {
		if c.addRow(sq) {
			continue
		}
		if sq.rows()*bs > sq.computed {
			break
		}
		if j := len(c.running) - 1; j > i {
			c.preempt(j)
			continue
		}
		return 0
	}
	return min(n, sq.rows()*bs-sq.computed)
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

// take admits sq (the head of the waiting queue) with the k rows of
// prefix hits in c.hits and need new rows. The caller has checked that
// their blocks are available.
func (c *core) take(sq *seq, k, need int, now time.Time) {
	c.waiting = slices.Delete(c.waiting, 0, 1)
	c.initTables(sq)
	for g, hits := range c.hits {
		for _, b := range hits {
			if b >= 0 {
				c.pool.acquire(b)
			}
		}
		sq.tables[g] = append(sq.tables[g], hits...)
		sq.first[g] = batch.FirstRow(c.window(g), c.cfg.BlockSize, k*c.cfg.BlockSize)
	}
	for range need {
		if !c.addRow(sq) {
			panic("scheduler: admission checked blocks that alloc does not have")
		}
	}
	sq.computed = k * c.cfg.BlockSize
	sq.registered = k
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

// admit tries to admit the head of the waiting queue with its first chunk.
func (c *core) admit(sq *seq, now time.Time) bool {
	if sq.noAdmit >= c.planNo {
		return false // preempted in this very step: no thrash
	}
	bs := c.cfg.BlockSize
	k := c.prefixHits(sq)
	done := k * bs
	n := min(len(sq.tokens)-done, c.budget)
	need := c.blocksFor(done+n) - k
	if need > 0 && !c.gate() {
		return false
	}
	wm := c.cfg.WatermarkBlocks
	if len(c.running) == 0 {
		wm = 0
	}
	if avail := c.pool.available() - c.cachedAmong() - wm; need*c.groups() > avail {
		// With layer groups a chunk takes a block of every group for each
		// row it spans, window groups included (its first queries read
		// back a window): the first chunk shrinks to the rows at hand, as
		// growChunk shrinks later ones, or a long prompt could never start
		// in a pool sized for what a decoding sequence holds.
		rows := avail / c.groups()
		if c.cfg.KVWindows == nil || rows <= 0 {
			return false
		}
		n = min(n, (k+rows)*bs-done)
		need = c.blocksFor(done+n) - k
	}
	c.take(sq, k, need, now)
	c.addEntry(sq, n)
	return true
}
