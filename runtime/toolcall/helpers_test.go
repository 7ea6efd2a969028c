package toolcall

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// result is a reply's events merged: the deltas of each stream
// concatenated, which is what a client rebuilds from them.
type result struct {
	Content   string
	Reasoning string
	Calls     []call
	Err       string // the *CallError's reason, or ""
	Truncated bool
}

type call struct {
	ID, Name, Args string
	Ended          bool
}

// counterIDs gives call_0, call_1, ... so runs compare equal.
func counterIDs() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("call_%d", n-1) }
}

// feed parses pieces as one reply and merges the events, checking on the
// way the rules every event stream must keep.
func feed(t testing.TB, f Format, opts Options, pieces []string) result {
	t.Helper()
	opts.NewID = counterIDs()
	p := NewParser(f, opts)
	var r result
	var failed bool
	check := func(evs []Event) {
		for _, e := range evs {
			if failed {
				t.Fatalf("event %+v after CallFailed", e)
			}
			switch e.Kind {
			case Content:
				r.Content += e.Text
			case Reasoning:
				r.Reasoning += e.Text
			case CallStart:
				if e.Index != len(r.Calls) {
					t.Fatalf("CallStart index %d, want %d", e.Index, len(r.Calls))
				}
				r.Calls = append(r.Calls, call{ID: e.ID, Name: e.Name})
			case CallArgs, CallEnd:
				if e.Index != len(r.Calls)-1 || r.Calls[e.Index].Ended {
					t.Fatalf("%v for call %d, but the open call is %d (%d calls)", e.Kind, e.Index, len(r.Calls)-1, len(r.Calls))
				}
				c := &r.Calls[e.Index]
				if e.Kind == CallArgs {
					c.Args += e.Text
				} else {
					c.Ended = true
					if !json.Valid([]byte(c.Args)) || !isObject(c.Args) {
						t.Fatalf("call %d ended with arguments %q: not a JSON object", e.Index, c.Args)
					}
				}
			case CallFailed:
				failed = true
				ce, ok := e.Err.(*CallError)
				if !ok {
					t.Fatalf("CallFailed with %T", e.Err)
				}
				r.Err, r.Truncated = ce.Reason, ce.Truncated
			default:
				t.Fatalf("event of kind %v", e.Kind)
			}
		}
	}
	whole := strings.Join(pieces, "")
	for _, s := range pieces {
		evs := p.Push(s)
		if utf8.ValidString(whole) {
			for _, e := range evs {
				if !utf8.ValidString(e.Text) {
					t.Fatalf("%v delta %q cuts a rune", e.Kind, e.Text)
				}
			}
		}
		check(evs)
	}
	evs, err := p.Finish()
	check(evs)
	if (err != nil) != failed {
		t.Fatalf("Finish error %v, but CallFailed sent: %v", err, failed)
	}
	if err == nil {
		for i, c := range r.Calls {
			if !c.Ended {
				t.Fatalf("call %d never ended and Finish said nothing", i)
			}
		}
	}
	return r
}

// splits yields the ways of cutting s into pieces that every parser must
// read alike: whole, byte by byte, every cut in two, every cut in three
// for short texts, and random token-sized pieces.
func splits(s string, seed uint64) [][]string {
	out := [][]string{{s}}
	bytes := make([]string, len(s))
	for i := 0; i < len(s); i++ {
		bytes[i] = s[i : i+1]
	}
	out = append(out, bytes)
	for i := 1; i < len(s); i++ {
		out = append(out, []string{s[:i], s[i:]})
	}
	if len(s) <= 120 {
		for i := 1; i < len(s); i++ {
			for j := i + 1; j < len(s); j++ {
				out = append(out, []string{s[:i], s[i:j], s[j:]})
			}
		}
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	for range 30 {
		var ps []string
		for rest := s; rest != ""; {
			n := 1 + rng.IntN(8)
			n = min(n, len(rest))
			ps = append(ps, rest[:n])
			rest = rest[n:]
		}
		out = append(out, ps)
	}
	return out
}

// parseCase is one reply and what it must parse to.
type parseCase struct {
	name string
	opts Options
	in   string
	want result
}

// runCases checks every case in every split.
func runCases(t *testing.T, f Format, cases []parseCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, pieces := range splits(tc.in, uint64(len(tc.in))) {
				got := feed(t, f, tc.opts, pieces)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Fatalf("split %d %q: (-want +got)\n%s", k, pieces, diff)
				}
			}
		})
	}
}

// calls builds the wanted calls with counter ids.
func calls(nameArgs ...string) []call {
	var cs []call
	for i := 0; i+1 < len(nameArgs); i += 2 {
		cs = append(cs, call{ID: fmt.Sprintf("call_%d", i/2), Name: nameArgs[i], Args: nameArgs[i+1], Ended: true})
	}
	return cs
}
