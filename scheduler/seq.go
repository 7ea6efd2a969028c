package scheduler

import (
	"strings"
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
	blocks    []int32
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

// stopActive says whether EOS and stop conditions apply to the token just
// appended: MinTokens tokens must already exist before it.
func (sq *seq) stopActive() bool { return sq.generated-1 >= sq.req.MinTokens }

// addText runs new text through stop-string matching and appends what can
// be emitted to ev.Text. final says no more text follows. It returns the
// stop string that matched, if any (the text after it is dropped).
func (sq *seq) addText(ev *Event, text string, final, active bool) (matched string, ok bool) {
	buf := sq.held + text
	sq.held = ""
	stops := sq.req.StopStrings
	if !active || len(stops) == 0 {
		ev.Text += buf
		return "", false
	}
	best, bestLen := -1, 0
	for _, s := range stops {
		if s == "" {
			continue
		}
		if i := strings.Index(buf, s); i >= 0 && (best < 0 || i < best || (i == best && len(s) > bestLen)) {
			best, bestLen, matched = i, len(s), s
		}
	}
	if best >= 0 {
		ev.Text += buf[:best]
		if sq.req.IncludeStopString {
			ev.Text += matched
		}
		return matched, true
	}
	if final {
		ev.Text += buf
		return "", false
	}
	keep := holdBack(buf, stops)
	ev.Text += buf[:len(buf)-keep]
	sq.held = buf[len(buf)-keep:]
	return "", false
}

// holdBack returns the length of the longest suffix of buf that is a proper
// prefix of some stop string (it may still grow into one).
func holdBack(buf string, stops []string) int {
	keep := 0
	for _, s := range stops {
		for n := min(len(s)-1, len(buf)); n > keep; n-- {
			if strings.HasSuffix(buf, s[:n]) {
				keep = n
				break
			}
		}
	}
	return keep
}
