package scheduler

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weft-inference/weft/runtime/sample"
)

// Output and stop conditions: what one sampled token does to its stream.
// The order is fixed: stop token ids, then EOS (both only once MinTokens
// tokens came before the token), then stop strings in the decoded text,
// then MaxTokens and the context length. On every end the decoder is
// flushed, and the flushed text is searched for stop strings too.

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
