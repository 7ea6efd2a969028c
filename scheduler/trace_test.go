package scheduler

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/scheduler/schedtest"
)

var update = flag.Bool("update", false, "rewrite the golden traces in testdata/ with what the core does now")

// The golden traces pin the core's behaviour step by step, as etcd raft's
// interaction files do. A trace file is a scenario, a line "----", then the
// trace the core produced for it; TestTraces replays every scenario against
// the synchronous core and the fake model and compares. After an intended
// change, rewrite them with `go test ./scheduler -run TestTraces -update`
// and read the diff.
//
// Scenario lines ('#' starts a comment):
//
//	config block 4 blocks 64 seqs 8 batch-tokens 16 watermark 0 context 512 batching static batch-size 3 prefix-cache off
//	submit 1 prompt 1x8+2x4 max 6 at 3 pri 1 timeout 2
//	cancel 1 at 5
//	capacity off at 2
//	capacity on at 4
//	fail at 3
//	fail at 3 seq 2
//
// config sets Config fields (the rest keep their defaults; watermark
// is 0 unless given). submit queues sequence 1 before step 3 (default 1)
// with prompt(1, 8) followed by prompt(2, 4), MaxTokens 6, Priority 1,
// IgnoreEOS, and a QueueTimeout of 2 steps (the trace's clock moves one
// second per step; 0: none). cancel cancels sequence 1 before step 5 (as
// the loop does with a cancel that arrived meanwhile). capacity turns a
// Config.Capacity gate off (admission paused) or on before step 2 or 4.
// fail makes step 3 fail: the whole step (every planned sequence fails),
// or with seq only that sequence's row (a batch.StepErrors). Before each
// step, as in Run: submits, cancels, capacity changes, then expiry of
// queue timeouts, then the plan. The core runs until every sequence has
// ended and no directive is left.
//
// Trace lines, per step that ran, or that planned nothing but had events
// ("step 4 (idle): ..."):
//
//	step 3: kv used 7 cached 2 free 55
//	  cancel 2 running           cancelled while waiting, preempted (waiting
//	                             with its history), admitted (running, its
//	                             prompt not yet all computed), running or done
//	  admission paused           the Capacity gate said no (resumed: yes again)
//	  fail 1                     the model failed this sequence's row
//	  preempt 2                  a running sequence gave its blocks back
//	  admit 1 cached 4           admitted, with 4 prompt tokens from the prefix cache
//	  1 chunk 4+8 sample         rows: seq, chunk (prompt or recompute) or decode,
//	  2 decode 13                position (+ tokens fed), sample when it asks for a token
//	  3 pad prompt 0+2           static padding rows (output discarded)
//	  3 pad decode 9
//	  finish 1 length 6          reason and completion tokens
//	  deliver 3                  a Final static mode held is sent (the group ended)
//
// kv is the ledger after the step. Every sequence's tokens are also checked
// against schedtest.Reference.
func TestTraces(t *testing.T) {
	files, err := filepath.Glob("testdata/*.trace")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.trace files")
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".trace"), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			scenario, want, ok := strings.Cut(string(data), "----\n")
			if !ok && !*update {
				t.Fatalf("%s: no ---- line", path)
			}
			got := runTrace(t, scenario)
			if *update {
				if err := os.WriteFile(path, []byte(scenario+"----\n"+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n")); diff != "" {
				t.Errorf("%s (-want +got); rerun with -update if the change is intended:\n%s", path, diff)
			}
		})
	}
}

// traceSub is one submit line.
type traceSub struct {
	at  int
	req Request
	id  uint64
}

// traceEvent is a cancel, capacity or fail line: what happens at step at.
type traceEvent struct {
	at       int
	kind     string // "cancel", "capacity", "fail"
	id       uint64 // cancel's sequence; fail's, 0: the whole step
	capacity bool   // capacity on
}

// traceGate is the Capacity of a trace: open or closed by capacity lines.
type traceGate struct{ open bool }

func (g *traceGate) AdmitOK() (bool, string) { return g.open, "trace: capacity off" }

// parseTrace reads a scenario into a config, its submissions and its
// other events; gate is the Capacity when capacity lines exist.
func parseTrace(t *testing.T, scenario string) (Config, []traceSub, []traceEvent, *traceGate) {
	t.Helper()
	var cfg Config
	watermark := 0 // set after validate, which turns 0 into its default
	var subs []traceSub
	var evs []traceEvent
	var gate *traceGate
	for n, line := range strings.Split(scenario, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		bad := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("scenario line %d %q: %s", n+1, line, fmt.Sprintf(format, args...))
		}
		num := func(s string) int {
			t.Helper()
			v, err := strconv.Atoi(s)
			if err != nil {
				bad("%v", err)
			}
			return v
		}
		switch f[0] {
		case "config":
			if len(f)%2 != 1 {
				bad("want key value pairs")
			}
			for i := 1; i < len(f); i += 2 {
				k, v := f[i], f[i+1]
				switch k {
				case "block":
					cfg.BlockSize = num(v)
				case "blocks":
					cfg.NumBlocks = num(v)
				case "seqs":
					cfg.MaxSeqs = num(v)
				case "batch-tokens":
					cfg.MaxBatchTokens = num(v)
				case "watermark":
					watermark = num(v)
				case "context":
					cfg.ContextLen = num(v)
				case "batching":
					cfg.Batching = v
				case "batch-size":
					cfg.BatchSize = num(v)
				case "prefix-cache":
					cfg.DisablePrefixCache = v == "off"
				default:
					bad("unknown config key %q", k)
				}
			}
		case "submit":
			if len(f) < 2 || len(f)%2 != 0 {
				bad("want submit ID key value...")
			}
			s := traceSub{at: 1, id: uint64(num(f[1])), req: Request{IgnoreEOS: true}}
			for i := 2; i < len(f); i += 2 {
				k, v := f[i], f[i+1]
				switch k {
				case "prompt":
					for _, part := range strings.Split(v, "+") {
						seed, size, ok := strings.Cut(part, "x")
						if !ok {
							bad("prompt part %q is not SEEDxLEN", part)
						}
						s.req.Prompt = append(s.req.Prompt, prompt(num(seed), num(size))...)
					}
				case "max":
					s.req.MaxTokens = num(v)
				case "at":
					s.at = num(v)
				case "pri":
					s.req.Priority = num(v)
				case "timeout":
					s.req.QueueTimeout = time.Duration(num(v)) * time.Second
				default:
					bad("unknown submit key %q", k)
				}
			}
			subs = append(subs, s)
		case "cancel":
			if len(f) != 4 || f[2] != "at" {
				bad("want cancel ID at STEP")
			}
			evs = append(evs, traceEvent{kind: "cancel", id: uint64(num(f[1])), at: num(f[3])})
		case "capacity":
			if len(f) != 4 || (f[1] != "on" && f[1] != "off") || f[2] != "at" {
				bad("want capacity on|off at STEP")
			}
			if gate == nil {
				gate = &traceGate{open: true}
				cfg.Capacity = gate
			}
			evs = append(evs, traceEvent{kind: "capacity", capacity: f[1] == "on", at: num(f[3])})
		case "fail":
			switch {
			case len(f) == 3 && f[1] == "at":
				evs = append(evs, traceEvent{kind: "fail", at: num(f[2])})
			case len(f) == 5 && f[1] == "at" && f[3] == "seq":
				evs = append(evs, traceEvent{kind: "fail", at: num(f[2]), id: uint64(num(f[4]))})
			default:
				bad("want fail at STEP [seq ID]")
			}
		default:
			bad("unknown directive %q", f[0])
		}
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	cfg.WatermarkBlocks = watermark
	return cfg, subs, evs, gate
}

// errTraceStep is the model's failure in a trace's fail line.
var errTraceStep = errors.New("trace: step failed")

// seqState names sq's state for a cancel line.
func seqState(sq *seq) string {
	switch {
	case sq.state == seqDone:
		return "done"
	case sq.state == seqWaiting && sq.admitted:
		return "preempted"
	case sq.state == seqWaiting:
		return "waiting"
	case !sq.prefilled:
		return "admitted"
	}
	return "running"
}

var finishNames = map[FinishReason]string{
	FinishEOS: "eos", FinishLength: "length", FinishStopSequence: "stop",
	FinishCancelled: "cancelled", FinishError: "error", FinishTimeout: "timeout",
}

// runTrace replays scenario against the core and returns its trace.
func runTrace(t *testing.T, scenario string) string {
	t.Helper()
	cfg, subs, evs, gate := parseTrace(t, scenario)
	c := newCore(cfg, new(atomicInt64))
	m := newFakeModel(cfg)
	failStep := false // the step about to run fails whole
	m.Fail = func(int) error {
		if failStep {
			return errTraceStep
		}
		return nil
	}
	now := time.Unix(0, 0)
	var seqs []*seq
	byID := map[uint64]*seq{}
	paused := false
	var b strings.Builder
	for step := 1; step < 100000; step++ {
		for _, s := range subs {
			if s.at == step {
				sq := testSeq(s.id, s.req)
				if s.req.QueueTimeout > 0 {
					sq.deadline = now.Add(s.req.QueueTimeout)
				}
				c.queued.Add(1)
				c.submit(sq)
				seqs = append(seqs, sq)
				byID[s.id] = sq
			}
		}
		before := make(map[*seq]uint8, len(seqs))
		for _, sq := range seqs {
			before[sq] = sq.state
		}
		var ev []string
		failSeq := uint64(0)
		failStep = false
		for _, e := range evs {
			if e.at != step {
				continue
			}
			switch e.kind {
			case "cancel":
				sq := byID[e.id]
				if sq == nil {
					t.Fatalf("step %d: cancel of sequence %d, never submitted", step, e.id)
				}
				ev = append(ev, fmt.Sprintf("cancel %d %s", e.id, seqState(sq)))
				c.cancel(sq, now)
			case "capacity":
				gate.open = e.capacity
			case "fail":
				failSeq, failStep = e.id, e.id == 0
			}
		}
		c.expire(now)
		for _, sq := range seqs {
			if before[sq] != seqDone && sq.state == seqDone {
				ev = append(ev, fmt.Sprintf("finish %d %s %d", sq.id, finishNames[finalReason(t, sq)], sq.generated))
				before[sq] = seqDone
			}
		}
		preempts := c.stats.Preemptions
		rows, samplers := c.plan(context.Background(), now)
		if c.paused != paused {
			paused = c.paused
			if paused {
				ev = append(ev, "admission paused")
			} else {
				ev = append(ev, "admission resumed")
			}
		}
		if len(rows) == 0 {
			if len(ev) > 0 {
				st := c.snapshot(false)
				fmt.Fprintf(&b, "step %d (idle): kv used %d cached %d free %d\n", step, st.KVBlocksUsed, st.KVBlocksCached, st.KVBlocksFree)
				for _, e := range ev {
					fmt.Fprintf(&b, "  %s\n", e)
				}
			}
			pending := false
			for _, s := range subs {
				pending = pending || s.at > step
			}
			for _, e := range evs {
				pending = pending || e.at > step
			}
			for _, sq := range seqs {
				pending = pending || (sq.state == seqWaiting && !sq.deadline.IsZero())
			}
			if !pending {
				if c.live > 0 {
					t.Fatalf("step %d: nothing planned with %d sequences live", step, c.live)
				}
				break
			}
			now = now.Add(time.Second)
			continue
		}
		for _, sq := range seqs {
			switch {
			case before[sq] == seqRunning && sq.state == seqWaiting:
				ev = append(ev, fmt.Sprintf("preempt %d", sq.id))
			case before[sq] == seqWaiting && sq.state == seqRunning:
				ev = append(ev, fmt.Sprintf("admit %d cached %d", sq.id, sq.computed))
			}
		}
		if got := c.stats.Preemptions - preempts; int(got) != strings.Count(strings.Join(ev, "\n"), "preempt ") {
			t.Fatalf("step %d: %d preemptions, %d seen", step, got, strings.Count(strings.Join(ev, "\n"), "preempt "))
		}
		for k, st := range rows {
			switch {
			case k >= len(c.entries) && st.Logits:
				ev = append(ev, fmt.Sprintf("%d pad decode %d", st.Seq, st.Pos))
			case k >= len(c.entries):
				ev = append(ev, fmt.Sprintf("%d pad prompt %d+%d", st.Seq, st.Pos, len(st.Tokens)))
			case c.entries[k].decode:
				ev = append(ev, fmt.Sprintf("%d decode %d", st.Seq, st.Pos))
			default:
				row := fmt.Sprintf("%d chunk %d+%d", st.Seq, st.Pos, len(st.Tokens))
				if c.entries[k].sample {
					row += " sample"
				}
				ev = append(ev, row)
			}
		}
		held := map[*seq]bool{}
		for _, sq := range seqs {
			before[sq] = sq.state
			held[sq] = sq.final != nil
		}
		res, err := m.Step(t.Context(), rows, samplers)
		if failStep {
			ev = append(ev, "fail step")
		}
		if failSeq != 0 && err == nil {
			for k, st := range rows {
				if st.Seq == failSeq {
					err = batch.StepErrors{{Index: k, Seq: st.Seq, Err: errTraceStep}}
					ev = append(ev, fmt.Sprintf("fail %d", st.Seq))
				}
			}
		}
		c.apply(res, err, now)
		if err := c.check(); err != nil {
			t.Fatalf("after step %d: %v", step, err)
		}
		for _, sq := range seqs {
			if before[sq] != seqDone && sq.state == seqDone {
				ev = append(ev, fmt.Sprintf("finish %d %s %d", sq.id, finishNames[finalReason(t, sq)], sq.generated))
			}
		}
		for _, sq := range seqs {
			if held[sq] && sq.final == nil {
				ev = append(ev, fmt.Sprintf("deliver %d", sq.id))
			}
		}
		st := c.snapshot(false)
		fmt.Fprintf(&b, "step %d: kv used %d cached %d free %d\n", step, st.KVBlocksUsed, st.KVBlocksCached, st.KVBlocksFree)
		for _, e := range ev {
			fmt.Fprintf(&b, "  %s\n", e)
		}
		now = now.Add(time.Second)
	}
	if err := m.Err(); err != nil {
		t.Errorf("fake model: %v", err)
	}
	for _, sq := range seqs {
		if sq.state != seqDone {
			t.Errorf("seq %d did not end", sq.id)
		}
		if diff := cmp.Diff(schedtest.Reference(sq.req.Prompt, sq.generated, nil), sq.tokens[sq.promptLen:]); diff != "" {
			t.Errorf("seq %d tokens (-want +got):\n%s", sq.id, diff)
		}
	}
	return b.String()
}

// finalReason is the reason sq ended with: its held Final (static mode) or
// the one in its stream's mailbox (the traces never read the streams).
func finalReason(t *testing.T, sq *seq) FinishReason {
	t.Helper()
	if sq.final != nil {
		return sq.final.Reason
	}
	sq.st.mu.Lock()
	defer sq.st.mu.Unlock()
	if f := sq.st.pending.Final; f != nil {
		return f.Reason
	}
	t.Fatalf("seq %d ended without a Final", sq.id)
	return FinishNone
}
