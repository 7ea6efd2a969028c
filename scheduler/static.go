package scheduler

import (
	"slices"
	"time"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// static is static batching, the baseline a fixed [B, T] batch gives (as
// in HF generate): a group of up to BatchSize waiting requests is admitted
// together with blocks for each member's whole run, prefilled, then decoded
// together until its longest member ends. The batch keeps its shape: short
// prompts are padded to the longest, and an ended member's row is still
// computed every decode step. Padding rows run on scratch blocks outside
// the ledger, after the planned entries, and their output is discarded.
type static struct {
	scratch int32 // first scratch block (ids scratch.. are outside the ledger)
	nslots  int   // scratch blocks: BatchSize-1

	group []*seq       // the current group, finished members included
	pads  []*padRow    // rows of the group's ended members
	ppads []*promptPad // prompt padding of the group's short members

	// The padding rows planned for this step, in batch order.
	stepPP   []ppStep
	stepPads []*padRow
}

var _ policy = (*static)(nil)

// ppStep is one prompt padding's share of a step.
type ppStep struct {
	pp *promptPad
	n  int
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

func newStaticPolicy(cfg Config) *static {
	return &static{scratch: int32(cfg.ledgerBlocks()), nslots: cfg.scratchBlocks()}
}

// plan admits a new group when none runs, then plans a prefill step (the
// members' prompts, then their prompt padding) until every prompt is done,
// then decode steps with one row per member, ended ones as padding. Blocks
// for each member's whole run are reserved at admission, so static mode
// never preempts.
func (s *static) plan(c *core, now time.Time) {
	s.stepPP, s.stepPads = s.stepPP[:0], s.stepPads[:0]
	c.paused, c.pauseReason = false, ""
	if len(s.group) == 0 {
		s.admitGroup(c, now)
	}
	prefilling := false
	for _, sq := range c.running {
		if !sq.prefilled {
			prefilling = true
			break
		}
	}
	for _, pp := range s.ppads {
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
			c.addEntry(sq, min(sq.remaining(), c.budget))
		case !prefilling:
			c.addEntry(sq, 1)
		}
	}
	if len(c.running) == 0 {
		return
	}
	if prefilling {
		// Prefill steps compute the prompt padding too, after the prompts.
		for _, pp := range s.ppads {
			if c.budget <= 0 {
				break
			}
			if n := min(len(pp.toks)-pp.done, c.budget); n > 0 {
				for len(pp.blocks)*c.cfg.BlockSize < pp.done+n {
					pp.blocks = append(pp.blocks, pp.block)
				}
				s.stepPP = append(s.stepPP, ppStep{pp, n})
				c.budget -= n
			}
		}
		return
	}
	// Decode steps keep the group's shape: ended members still take their
	// row (BatchSize <= MaxBatchTokens, so the budget always holds them).
	for _, p := range s.pads {
		if c.budget <= 0 {
			break
		}
		s.padTable(c, p)
		s.stepPads = append(s.stepPads, p)
		c.budget--
	}
}

// admitGroup admits up to BatchSize waiting requests in queue order, each
// with blocks for its whole run, and sets up their prompt padding.
func (s *static) admitGroup(c *core, now time.Time) {
	for len(c.waiting) > 0 && len(s.group) < c.cfg.BatchSize {
		sq := c.waiting[0]
		k := c.prefixHits(sq)
		total := min(len(sq.tokens)+sq.req.MaxTokens-sq.generated, c.cfg.ContextLen)
		need := c.blocksFor(total) - k
		if need > 0 && !c.gate() {
			break
		}
		if need > c.pool.available()-c.cachedAmong() {
			break
		}
		c.take(sq, k, need, now)
		sq.inGroup = true
		s.group = append(s.group, sq)
	}
	s.startPromptPads()
}

func (s *static) pad(rows []batch.SeqStep, smps []*sample.Sampler) ([]batch.SeqStep, []*sample.Sampler) {
	for _, ps := range s.stepPP {
		pp := ps.pp
		rows = append(rows, batch.SeqStep{
			Seq:    pp.sq.id,
			Tokens: pp.toks[pp.done : pp.done+ps.n],
			Pos:    pp.done,
			Blocks: pp.blocks,
		})
		smps = append(smps, nil)
	}
	for _, p := range s.stepPads {
		rows = append(rows, batch.SeqStep{
			Seq:    p.sq.id,
			Tokens: []int32{p.tok},
			Pos:    p.pos,
			Blocks: p.blocks,
			Logits: true,
		})
		smps = append(smps, p.sampler)
	}
	return rows, smps
}

// padded counts the step's padding as model work (LastBatchTokens) and as
// padding, never as prompt or generated tokens, and advances the rows.
func (s *static) padded(c *core) {
	for _, ps := range s.stepPP {
		c.stats.LastBatchTokens += ps.n
		c.stats.LastPaddingTok += ps.n
		c.stats.PaddingTokens += uint64(ps.n)
		ps.pp.done += ps.n
	}
	for _, p := range s.stepPads {
		c.stats.LastBatchTokens++
		c.stats.LastPaddingTok++
		c.stats.PaddingTokens++
		p.pos = min(p.pos+1, c.cfg.ContextLen-1)
	}
	s.stepPP, s.stepPads = s.stepPP[:0], s.stepPads[:0]
}

// ending gives a member that ends while others of its group still run a
// padding row, and holds its Final until the group ends unless it was
// cancelled or failed.
func (s *static) ending(c *core, sq *seq, reason FinishReason) (hold bool) {
	if !sq.inGroup {
		return false
	}
	if s.groupRunning(sq) {
		s.startPad(c, sq) // reads sq.computed, so before its blocks go
	}
	return reason != FinishCancelled && reason != FinishError
}

// startPromptPads sets up the prompt padding of a new group's members whose
// prompts are shorter than its longest; they are at most len(group)-1, so
// each gets its own scratch block.
func (s *static) startPromptPads() {
	longest := 0
	for _, sq := range s.group {
		longest = max(longest, sq.promptLen)
	}
	for _, sq := range s.group {
		need := longest - sq.promptLen
		if need == 0 {
			continue
		}
		toks := make([]int32, need)
		for i := range toks {
			toks[i] = sq.tokens[0]
		}
		s.ppads = append(s.ppads, &promptPad{sq: sq, toks: toks, block: s.scratch + int32(len(s.ppads))})
	}
}

// startPad gives sq, a group member that just ended while others of its
// group still run, a padding row on the next free scratch block. Rows are
// only freed when the group ends, and at most len(group)-1 members can end
// while another runs, so BatchSize-1 scratch blocks always suffice.
func (s *static) startPad(c *core, sq *seq) {
	if len(s.pads) >= s.nslots {
		panic("scheduler: static group has more padding rows than scratch blocks")
	}
	s.pads = append(s.pads, &padRow{
		sq:      sq,
		tok:     sq.tokens[len(sq.tokens)-1],
		pos:     min(sq.computed, c.cfg.ContextLen-1),
		sampler: sample.New(sample.Params{}, nil),
	})
}

// padTable makes p's block table cover its next position with its scratch
// block.
func (s *static) padTable(c *core, p *padRow) {
	b := s.scratch + int32(slices.Index(s.pads, p))
	for len(p.blocks)*c.cfg.BlockSize < p.pos+1 {
		p.blocks = append(p.blocks, b)
	}
}

// groupRunning says whether a member of the group other than sq is still
// running.
func (s *static) groupRunning(sq *seq) bool {
	for _, m := range s.group {
		if m != sq && m.state == seqRunning {
			return true
		}
	}
	return false
}

// settle delivers the held answers of the group once none of its members
// runs any more.
func (s *static) settle(*core) {
	if len(s.group) == 0 {
		return
	}
	for _, sq := range s.group {
		if sq.state != seqDone {
			return
		}
	}
	for _, sq := range s.group {
		if sq.final != nil {
			sq.st.push(Event{Final: sq.final})
			sq.final = nil
		}
		sq.inGroup = false
	}
	s.group = s.group[:0]
	clear(s.pads)
	s.pads = s.pads[:0]
	clear(s.ppads)
	s.ppads = s.ppads[:0]
}
