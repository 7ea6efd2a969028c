package scheduler

import (
	"fmt"

	"github.com/weft-inference/weft/runtime/batch"
)

// check verifies the core's invariants (doc.go lists them); the tests call
// it after every step.
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
		if len(sq.tables) != c.groups() || len(sq.first) != c.groups() {
			return fmt.Errorf("seq %d: %d block tables, %d groups", sq.id, len(sq.tables), c.groups())
		}
		rows := sq.rows()
		if sq.computed > len(sq.tokens) || rows*bs < sq.computed {
			return fmt.Errorf("seq %d: computed %d of %d tokens with %d block rows", sq.id, sq.computed, len(sq.tokens), rows)
		}
		if c.cfg.Batching == BatchingContinuous && rows > c.blocksFor(sq.computed) {
			return fmt.Errorf("seq %d: %d block rows for %d computed positions (unverified drafts' blocks kept?)", sq.id, rows, sq.computed)
		}
		if sq.noAdmit >= c.planNo {
			return fmt.Errorf("seq %d readmitted in the plan that preempted it", sq.id)
		}
		if sq.pool != nil && (sq.pool.Tokens() != sq.computed || sq.registered != 0) {
			return fmt.Errorf("embedding seq %d: %d tokens pooled, %d computed, %d blocks registered", sq.id, sq.pool.Tokens(), sq.computed, sq.registered)
		}
		if sq.registered > rows {
			return fmt.Errorf("seq %d: %d registered of %d block rows", sq.id, sq.registered, rows)
		}
		seen := make(map[int32]bool, rows*len(sq.tables))
		for g, t := range sq.tables {
			if len(t) != rows {
				return fmt.Errorf("seq %d: group %d has %d rows, group 0 %d", sq.id, g, len(t), rows)
			}
			// A window group holds exactly the rows a later query can
			// read: those below slid out of its window and went back.
			lo := batch.FirstRow(c.window(g), bs, sq.computed)
			if sq.first[g] != lo {
				return fmt.Errorf("seq %d: group %d (window %d) holds rows from %d, want %d at %d computed", sq.id, g, c.window(g), sq.first[g], lo, sq.computed)
			}
			for i, b := range t {
				if (b < 0) != (i < lo) {
					return fmt.Errorf("seq %d: group %d (window %d) row %d is block %d with %d computed", sq.id, g, c.window(g), i, b, sq.computed)
				}
				if b < 0 {
					continue
				}
				if seen[b] {
					return fmt.Errorf("seq %d holds block %d twice", sq.id, b)
				}
				seen[b] = true
				refs[b]++
			}
		}
	}
	for i, sq := range c.waiting {
		if sq.pool != nil && sq.pool.Tokens() != 0 {
			return fmt.Errorf("waiting embedding seq %d: %d tokens pooled", sq.id, sq.pool.Tokens())
		}
		if sq.state != seqWaiting || sq.rows() != 0 || sq.computed != 0 {
			return fmt.Errorf("waiting seq %d: state %d, %d block rows, computed %d", sq.id, sq.state, sq.rows(), sq.computed)
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
	if s, ok := c.policy.(*static); ok {
		if err := s.check(c); err != nil {
			return err
		}
	}
	if err := c.pool.check(refs); err != nil {
		return fmt.Errorf("kv ledger: %w", err)
	}
	return nil
}

// check verifies the static policy's invariants: padding rows belong to
// ended members of the current group that hold no ledger block, each on its
// own scratch block, within ContextLen, and there are no more of them than
// scratch blocks; so do prompt paddings (of any member of the group).
func (s *static) check(c *core) error {
	if len(s.pads) > 0 && len(s.group) == 0 || len(s.pads) > s.nslots {
		return fmt.Errorf("%d padding rows, group of %d, %d scratch blocks", len(s.pads), len(s.group), s.nslots)
	}
	for i, p := range s.pads {
		if p.sq.state != seqDone || !p.sq.inGroup || p.sq.rows() != 0 {
			return fmt.Errorf("padding row %d: seq %d in state %d, in group %v, %d blocks", i, p.sq.id, p.sq.state, p.sq.inGroup, p.sq.rows())
		}
		if p.pos >= c.cfg.ContextLen {
			return fmt.Errorf("padding row %d at position %d, context %d", i, p.pos, c.cfg.ContextLen)
		}
		for _, b := range p.blocks {
			if b != s.scratch+int32(i) {
				return fmt.Errorf("padding row %d holds block %d, its scratch block is %d", i, b, s.scratch+int32(i))
			}
		}
	}
	if len(s.ppads) > 0 && len(s.group) == 0 || len(s.ppads) > s.nslots {
		return fmt.Errorf("%d prompt paddings, group of %d, %d scratch blocks", len(s.ppads), len(s.group), s.nslots)
	}
	for i, pp := range s.ppads {
		if pp.block != s.scratch+int32(i) || pp.done > len(pp.toks) || !pp.sq.inGroup {
			return fmt.Errorf("prompt padding %d of seq %d: block %d (scratch %d), %d of %d done", i, pp.sq.id, pp.block, s.scratch+int32(i), pp.done, len(pp.toks))
		}
		for _, b := range pp.blocks {
			if b != pp.block {
				return fmt.Errorf("prompt padding %d holds block %d, its scratch block is %d", i, b, pp.block)
			}
		}
	}
	return nil
}
