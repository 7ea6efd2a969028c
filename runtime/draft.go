package runtime

import (
	"context"
	"fmt"

	"github.com/weft-inference/weft/runtime/batch"
)

// DraftModel proposes speculative drafts with a second model that shares
// the target's vocabulary (typically a smaller or more quantised copy of
// it): for each sequence it decodes greedily a few tokens past the
// sequence's history, and the target then verifies them (the scheduler's
// SpecConfig.Drafter).
//
// KV: the draft model keeps its own paged pool, the one its backend
// allocated, with a block table per sequence kept here, not in the
// scheduler's ledger: the draft's K/V never mix with the target's blocks
// or its prefix cache, and a full draft pool only means that a sequence
// gets no draft (the target never waits for it). For each sequence it
// remembers the tokens whose K/V its blocks hold; a Draft keeps the
// longest common prefix of those with the sequence's current history
// (what was rejected goes), feeds the rest of the history (the whole
// prompt the first time, at most MaxChunk tokens per call: a longer
// catch-up spreads over several calls and drafts nothing until it is
// done), then decodes its drafts one position at a time, each position one
// ragged batch over every drafting sequence.
//
// A DraftModel is owned by one goroutine (the scheduler's step loop): Draft
// and Forget must not be called concurrently.
type DraftModel struct {
	b        batch.Backend
	vocab    int
	bs       int
	maxChunk int
	free     []int32 // free blocks of the draft pool, a stack
	seqs     map[uint64]*draftSeq

	// Per-call scratch, reused.
	act    []draftJob
	steps  []batch.SeqStep
	slots  [][]float32
	logits []float32
}

// draftSeq is one sequence's state in the draft pool.
type draftSeq struct {
	held   []int32 // tokens whose K/V are in blocks, positions 0..len-1
	blocks []int32 // block table
}

// draftJob is one request's progress within a Draft call.
type draftJob struct {
	r     *batch.DraftRequest
	s     *draftSeq
	feed  []int32 // tokens to feed this pass
	k     int     // drafts to make (0: catch up only)
	got   int     // drafts made
	fresh int32   // the last draft made, fed next pass
}

// DefaultDraftChunk is the most history tokens a DraftModel feeds one
// sequence in one Draft call.
const DefaultDraftChunk = 512

// NewDraftModel returns a drafter over b, the draft model's backend, whose
// logits have vocabSize entries. b's pool must have one block table for
// every layer (no sliding-window groups). maxChunk bounds the history
// tokens fed per sequence and call (0: DefaultDraftChunk).
func NewDraftModel(b batch.Backend, vocabSize, maxChunk int) (*DraftModel, error) {
	kv := b.KV()
	if kv.Windows != nil {
		return nil, fmt.Errorf("draft model: backend %s lays its KV out in window groups; build it with one table", b.Name())
	}
	if kv.BlockSize <= 0 || kv.NumBlocks <= 0 {
		return nil, fmt.Errorf("draft model: backend %s has no KV pool (%d blocks of %d)", b.Name(), kv.NumBlocks, kv.BlockSize)
	}
	if maxChunk == 0 {
		maxChunk = DefaultDraftChunk
	}
	if maxChunk < 1 {
		return nil, fmt.Errorf("draft model: chunk %d must be > 0", maxChunk)
	}
	d := &DraftModel{b: b, vocab: vocabSize, bs: kv.BlockSize, maxChunk: maxChunk, seqs: map[uint64]*draftSeq{}}
	d.free = make([]int32, kv.NumBlocks)
	for i := range d.free {
		d.free[i] = int32(kv.NumBlocks - 1 - i) // block 0 on top
	}
	return d, nil
}

// FreeBlocks is the number of blocks of the draft pool no sequence holds.
func (d *DraftModel) FreeBlocks() int { return len(d.free) }

// Sequences is the number of sequences the drafter keeps state for.
func (d *DraftModel) Sequences() int { return len(d.seqs) }

// Forget drops seq's state and gives its blocks back (the sequence
// finished, was cancelled or preempted). Unknown ids are ignored.
func (d *DraftModel) Forget(seq uint64) {
	if s, ok := d.seqs[seq]; ok {
		d.shrink(s, 0)
		delete(d.seqs, seq)
	}
}

// shrink keeps s's first n blocks and frees the rest.
func (d *DraftModel) shrink(s *draftSeq, n int) {
	for len(s.blocks) > n {
		d.free = append(d.free, s.blocks[len(s.blocks)-1])
		s.blocks = s.blocks[:len(s.blocks)-1]
	}
}

// grow gives s blocks for n positions, as far as the pool allows; it
// returns the positions s's blocks then hold.
func (d *DraftModel) grow(s *draftSeq, n int) int {
	for len(s.blocks)*d.bs < n && len(d.free) > 0 {
		s.blocks = append(s.blocks, d.free[len(d.free)-1])
		d.free = d.free[:len(d.free)-1]
	}
	return len(s.blocks) * d.bs
}

// Draft appends to each request's Out up to Max tokens: the draft model's
// greedy continuation of History (argmax, lowest id on ties). A sequence
// whose history is still being caught up, or that finds no room in the
// draft pool, gets none. An error of the backend fails the call (no
// request gets tokens); the state stays consistent, and the next call
// feeds again whatever was not fed.
func (d *DraftModel) Draft(ctx context.Context, reqs []batch.DraftRequest) error {
	act := d.act[:0]
	for i := range reqs {
		r := &reqs[i]
		H := r.History
		if r.Max <= 0 || len(H) == 0 {
			continue
		}
		s := d.seqs[r.Seq]
		if s == nil {
			s = &draftSeq{}
			d.seqs[r.Seq] = s
		}
		p := commonPrefix(s.held, H)
		if p == len(H) {
			p-- // the last token's logits are needed: feed it again
		}
		s.held = s.held[:p]
		d.shrink(s, (p+d.bs-1)/d.bs)
		j := draftJob{r: r, s: s, feed: H[p:]}
		if len(j.feed) > d.maxChunk {
			j.feed = j.feed[:d.maxChunk] // catch up only, this call
		} else {
			// The history, then Max-1 drafts fed (the last is not).
			j.k = r.Max
		}
		have := d.grow(s, p+len(j.feed)+max(j.k-1, 0))
		switch {
		case have < p+len(j.feed):
			// No room for the history: no draft. The blocks grown for
			// nothing go back; the held prefix stays for later.
			d.shrink(s, (p+d.bs-1)/d.bs)
			if len(s.blocks) == 0 {
				delete(d.seqs, r.Seq)
			}
			continue
		case j.k > 0:
			j.k = min(j.k, have-(p+len(j.feed))+1)
		}
		act = append(act, j)
	}
	d.act = act
	defer func() { d.act = act[:0] }()
	// Pass 0 feeds the histories; pass t > 0 feeds each sequence's draft
	// t and yields draft t+1.
	for pass := 0; ; pass++ {
		steps, slots := d.steps[:0], d.slots[:0]
		rows := 0
		for i := range act {
			j := &act[i]
			if pass > 0 {
				if j.got == 0 || j.got >= j.k {
					j.feed = nil
					continue
				}
				j.feed = []int32{j.fresh}
			}
			logits := j.k > 0
			steps = append(steps, batch.SeqStep{Seq: j.r.Seq, Tokens: j.feed, Pos: len(j.s.held), Blocks: j.s.blocks, Logits: logits})
			if logits {
				rows++
			}
		}
		d.steps = steps
		if len(steps) == 0 {
			break
		}
		if need := rows * d.vocab; len(d.logits) < need {
			d.logits = make([]float32, need)
		}
		buf := d.logits
		for _, st := range steps {
			var l []float32
			if st.Logits {
				l, buf = buf[:d.vocab:d.vocab], buf[d.vocab:]
			}
			slots = append(slots, l)
		}
		d.slots = slots
		if err := d.b.Forward(ctx, steps, slots); err != nil {
			return fmt.Errorf("draft model: %w", err)
		}
		n := 0
		for i := range act {
			j := &act[i]
			if len(j.feed) == 0 {
				continue
			}
			j.s.held = append(j.s.held, j.feed...)
			if l := slots[n]; l != nil {
				j.fresh = argmax(l)
				j.got++
			}
			n++
		}
	}
	for i := range act {
		j := &act[i]
		// Every draft but the last was fed, so it is in held already.
		if j.got > 0 {
			H := len(j.r.History)
			j.r.Out = append(j.r.Out, j.s.held[H:]...)
			j.r.Out = append(j.r.Out, j.fresh)
		}
	}
	return nil
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// argmax is the index of l's largest value, the lowest on ties.
func argmax(l []float32) int32 {
	best := 0
	for i, v := range l {
		if v > l[best] {
			best = i
		}
	}
	return int32(best)
}

// CheckDraftVocab reports whether draft may draft for target: the same
// vocabulary (size, every token's text) and the same BOS and EOS, so a
// token id means the same thing to both.
func CheckDraftVocab(target, draft *Model) error {
	tv, dv := target.HP.VocabSize, draft.HP.VocabSize
	if tv != dv {
		return fmt.Errorf("draft model %s has %d tokens, target %s has %d: they must share a vocabulary", draft.Name, dv, target.Name, tv)
	}
	tt, dt := target.Tok, draft.Tok
	if tt.VocabSize() != dt.VocabSize() {
		return fmt.Errorf("draft model %s's tokenizer has %d tokens, target %s's has %d: they must share a vocabulary", draft.Name, dt.VocabSize(), target.Name, tt.VocabSize())
	}
	if tt.BOS() != dt.BOS() || tt.EOS() != dt.EOS() {
		return fmt.Errorf("draft model %s has BOS %d and EOS %d, target %s has %d and %d: they must share a vocabulary", draft.Name, dt.BOS(), dt.EOS(), target.Name, tt.BOS(), tt.EOS())
	}
	for id := range int32(tt.VocabSize()) {
		if a, b := tt.Piece(id), dt.Piece(id); a != b {
			return fmt.Errorf("draft model %s's token %d is %q, target %s's is %q: they must share a vocabulary", draft.Name, id, b, target.Name, a)
		}
	}
	return nil
}
