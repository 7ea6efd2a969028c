package scheduler

import (
	"context"
	"slices"
	"time"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// Speculative decoding inside the ragged batch. A decoding sequence may feed,
// instead of its one last token, a row of 1+k tokens: the last token, then
// k tokens drafted for it (SpecConfig.Source; SpecNgram: prompt lookup;
// SpecDraft: a draft model's greedy continuation, SpecConfig.Drafter, which
// keeps its own K/V in its own pool and is told to Forget a sequence
// whenever the sequence's blocks go back: finish, cancel, preemption).
// The model computes the logits of all k+1 positions in the same pass and
// samples them position by position (Verifier.StepDrafts): the drafts its
// sampler would have chosen anyway are accepted, the first one it would not
// is replaced by its own choice, and the sequence gains up to k+1 tokens
// for one read of the weights. Accepted tokens go through the stop
// conditions one by one, as if decoded alone (onToken); a stop among them
// ends the sequence and drops the rest.
//
// KV: the row writes K/V at positions computed .. computed+k. Only the
// positions of the last token and the accepted drafts are verified, so
// computed advances past those alone; the rejected positions hold stale K/V
// that the next rows overwrite before anything reads them (attention reads
// positions below the token's own). Blocks that hold nothing verified go
// back to the pool after the step (trimDrafts), and registerFull registers
// only blocks whose positions are all below computed, so the prefix cache
// never holds unverified K/V.
//
// Exactness: each emitted token is what decoding alone would emit from the
// same logits (greedy: the same token; sampled: the same seeded draw). A
// drafted row changes the step's shape, as continuous batching does; with
// kernels whose results depend on the token count (the default CPU
// products), a position's logits may differ in the last bits from a
// one-token step's, and a near-tie may then go the other way. With
// batch-invariant products (--batch-invariant) the tokens are identical.
//
// When: drafts are planned last (plan step 4), only for sequences that are
// decoding, from the budget and blocks left over (beyond the watermark;
// drafts never preempt), only while the step holds at most
// SpecConfig.MaxStepTokens tokens, and never past MaxTokens or the context.
// Each sequence's draft length adapts: it doubles (up to MaxDraft) when
// every draft was accepted, becomes one more than the accepted count when
// some were, halves when none was, and after specMisses outright rejections
// in a row the sequence stops drafting for PauseSteps decode steps.

// specState is one sequence's speculative decoding state.
type specState struct {
	k      int     // current draft length cap (0: not yet started)
	misses int     // consecutive steps whose drafts were all rejected
	pause  int     // decode steps left without drafting
	row    []int32 // the row fed: the last token, then the drafts
	// drafted and accepted count this sequence's drafts (Final).
	drafted, accepted int
}

// specMisses is the number of steps in a row with every draft rejected
// after which a sequence pauses drafting.
const specMisses = 3

// specStartDraft is a sequence's first draft length (capped by MaxDraft).
const specStartDraft = 2

// planDrafts extends the step's decode entries with drafts. An n-gram
// draft is made on the spot; a Drafter gets one call with every sequence
// that may speculate, each with its room reserved from the step's budget
// until the drafts are known.
func (c *core) planDrafts(ctx context.Context) {
	sc := &c.cfg.Spec
	planned := c.cfg.MaxBatchTokens - c.budget
	reqs, at := c.draftReqs[:0], c.draftAt[:0]
	for k := range c.entries {
		e := &c.entries[k]
		if e.dropped || !e.decode || !e.sample {
			continue
		}
		sq := e.sq
		if sq.spec.pause > 0 {
			sq.spec.pause--
			continue
		}
		if sq.spec.k == 0 {
			sq.spec.k = min(specStartDraft, sc.MaxDraft)
		}
		room := min(sq.spec.k, c.budget, sc.MaxStepTokens-planned,
			sq.req.MaxTokens-sq.generated-1, c.cfg.ContextLen-len(sq.tokens)-1)
		if room <= 0 {
			continue
		}
		row := append(sq.spec.row[:0], sq.tokens[sq.computed])
		if sc.Drafter == nil {
			sq.spec.row = ngramDraft(sq.tokens, sc.NgramMax, sc.NgramMin, room, row)
			planned += c.fitDraft(e)
			continue
		}
		reqs = append(reqs, batch.DraftRequest{Seq: sq.id, History: sq.tokens[:sq.computed+1], Max: room, Out: row})
		at = append(at, k)
		c.budget -= room
		planned += room
	}
	c.draftReqs, c.draftAt = reqs, at
	if len(reqs) == 0 {
		return
	}
	err := sc.Drafter.Draft(ctx, reqs)
	for i := range reqs {
		r := &reqs[i]
		e := &c.entries[at[i]]
		c.budget += r.Max
		out := r.Out
		if err != nil {
			out = out[:1] // no drafts this step
		}
		e.sq.spec.row = out[:min(len(out), 1+r.Max)]
		c.fitDraft(e)
		r.History, r.Out = nil, nil // hold no sequence's memory
	}
}

// fitDraft plans e's drafts (e.sq.spec.row: the decode token, then the
// drafts) with blocks for their positions, from what is free beyond the
// watermark; the drafts shrink to what the blocks hold. It returns the
// drafts planned.
func (c *core) fitDraft(e *entry) int {
	sq := e.sq
	bs := c.cfg.BlockSize
	d := len(sq.spec.row) - 1
	for sq.rows()*bs < sq.computed+1+d && c.pool.available()-c.groups() >= c.cfg.WatermarkBlocks {
		if !c.addRow(sq) {
			break
		}
	}
	d = min(d, sq.rows()*bs-sq.computed-1)
	if d <= 0 {
		return 0
	}
	sq.spec.row = sq.spec.row[:1+d]
	e.draft = d
	e.n += d
	c.budget -= d
	return d
}

// ngramDraft appends to out k tokens proposed to follow hist: the
// continuation of the latest earlier occurrence of hist's last n tokens,
// for the longest n in [nMin, nMax] that has one. It appends nothing when
// no suffix recurs. A match at distance p (the occurrence starts p tokens
// before the suffix) says the text repeats with period p; when the
// continuation reaches the end of hist before k tokens, it goes on
// copying from p tokens back, drafts included, as an overlapping copy
// does: a run of one token, or any short loop, drafts k tokens rather
// than only the p that hist holds past the match. The search is a scan of
// the history per n (linear in its length), small beside a forward pass.
func ngramDraft(hist []int32, nMax, nMin, k int, out []int32) []int32 {
	L := len(hist)
	for n := min(nMax, L-1); n >= nMin; n-- {
		pat := hist[L-n:]
		for j := L - n - 1; j >= 0; j-- {
			if hist[j] == pat[0] && slices.Equal(hist[j:j+n], pat) {
				base := len(out)
				for t := range k {
					if src := j + n + t; src < L {
						out = append(out, hist[src])
					} else {
						out = append(out, out[base+src-L])
					}
				}
				return out
			}
		}
	}
	return out
}

// applyDrafts takes the tokens of a drafted row: the accepted drafts, then
// the token sampled after them. Each goes through the stop conditions as
// if decoded alone; K/V become verified one position at a time, so the
// prefix cache only ever registers verified blocks.
func (c *core) applyDrafts(sq *seq, e entry, toks []sample.Result, now time.Time) {
	accepted := len(toks) - 1
	c.stats.SpecDraftTokens += uint64(e.draft)
	c.stats.SpecAcceptedTokens += uint64(accepted)
	sq.spec.drafted += e.draft
	sq.spec.accepted += accepted
	c.adaptDraft(sq, e.draft, accepted)
	sq.computed++ // the fed token
	c.registerFull(sq)
	for j, r := range toks {
		c.onToken(sq, r, now)
		if sq.state != seqRunning {
			return
		}
		if j < accepted {
			sq.computed++ // an accepted draft: its K/V are verified
			c.registerFull(sq)
		}
	}
	c.trimDrafts(sq)
}

// adaptDraft sets sq's next draft length from this step's acceptance.
func (c *core) adaptDraft(sq *seq, drafted, accepted int) {
	s := &sq.spec
	switch {
	case accepted == drafted:
		s.k = min(2*s.k, c.cfg.Spec.MaxDraft)
		s.misses = 0
	case accepted > 0:
		s.k = accepted + 1
		s.misses = 0
	default:
		s.k = max(s.k/2, 1)
		s.misses++
		if s.misses >= specMisses {
			s.misses = 0
			s.pause = c.cfg.Spec.PauseSteps
		}
	}
}

// trimDrafts gives back the blocks past sq's computed positions: after a
// rejection they hold only unverified K/V. They were never registered.
// Then the window groups give back what slid out of their windows.
func (c *core) trimDrafts(sq *seq) {
	c.trimRows(sq, c.blocksFor(sq.computed))
	c.slide(sq)
}
