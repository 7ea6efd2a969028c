package scheduler

import (
	"github.com/weft-inference/weft/runtime/batch"
	"time"

	"github.com/weft-inference/weft/runtime/sample"
)

// Sequence states, owned by the loop.
const (
	seqNew     uint8 = iota // submitted, not yet seen by the loop
	seqWaiting              // in the waiting queue (first time or preempted)
	seqRunning              // in the running set, holds blocks
	seqDone                 // finished; Final sent or (static mode) held
)

// seq is one request's state. Submit fills it in; from the moment it is sent
// to the loop, only the loop touches it.
type seq struct {
	id  uint64
	req Request
	st  *Stream

	// Set by Submit, read by the loop when the sequence ends.
	stopAfter func() bool // deregisters the cancellation AfterFunc
	sent      chan struct{}

	state     uint8
	submitted time.Time
	deadline  time.Time // zero: no queue timeout

	// tokens is the full history, prompt then generated; computed of them
	// have K/V in blocks. The step feeds tokens[computed:...].
	tokens    []int32
	promptLen int
	computed  int
	// tables are the block tables, one per layer group (tables.go);
	// first[g] is the first row group g still holds (the rows below slid
	// out of its window and are -1).
	tables [][]int32
	first  []int
	// hashes[i] is the chain hash of full block i of tokens (filled lazily);
	// registered full blocks have been offered to the prefix cache.
	hashes     []uint64
	registered int

	sampler *sample.Sampler
	dec     TextDecoder
	held    string // text that may still become a stop string

	generated  int
	rank       uint64 // first-admission order; victims are chosen by it
	admitted   bool
	admittedAt time.Time
	firstTokAt time.Time
	cached     int    // prompt tokens served from the prefix cache
	noAdmit    uint64 // not (re)admitted at plan numbers <= noAdmit
	prefilled  bool   // the prompt's last chunk has run (static mode uses it)
	inGroup    bool   // static mode: member of the current group

	final *Final // static mode: held until the group ends

	spec specState // speculative decoding (spec.go)

	// pool folds the hidden states of an embedding request's prompt
	// (Request.Embed) as its chunks run; nil for every other request.
	pool *batch.Pool
}

// remaining is the number of tokens not yet fed (1 while decoding).
func (sq *seq) remaining() int { return len(sq.tokens) - sq.computed }

// blockHash returns the chain hash of full block i of the token history.
func (sq *seq) blockHash(i, blockSize int) uint64 {
	for len(sq.hashes) <= i {
		k := len(sq.hashes)
		var parent uint64
		if k > 0 {
			parent = sq.hashes[k-1]
		}
		sq.hashes = append(sq.hashes, chainHash(parent, sq.tokens[k*blockSize:(k+1)*blockSize]))
	}
	return sq.hashes[i]
}

func (sq *seq) parentHash(i, blockSize int) uint64 {
	if i == 0 {
		return 0
	}
	return sq.blockHash(i-1, blockSize)
}
