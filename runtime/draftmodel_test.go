package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weft-inference/weft/runtime/batch"
)

// pagedMarkov is markovBackend with a paged pool: it records every row it
// is fed and checks each row's block table against the pool (ids in
// range, enough of them, no block in two tables of one step). fail makes
// the next Forward fail.
type pagedMarkov struct {
	markovBackend
	bs, blocks int
	passes     [][]string // per Forward: "seq@pos:tokens" (L when logits)
	fail       bool
	t          *testing.T
}

func (f *pagedMarkov) KV() batch.KVInfo { return batch.KVInfo{BlockSize: f.bs, NumBlocks: f.blocks} }

func (f *pagedMarkov) Forward(ctx context.Context, seqs []batch.SeqStep, logits [][]float32) error {
	if f.fail {
		f.fail = false
		return errors.New("injected")
	}
	var pass []string
	used := map[int32]bool{}
	for _, s := range seqs {
		if len(s.Blocks)*f.bs < s.Pos+len(s.Tokens) {
			f.t.Errorf("seq %d: %d blocks for positions up to %d", s.Seq, len(s.Blocks), s.Pos+len(s.Tokens))
		}
		for _, b := range s.Blocks {
			if b < 0 || int(b) >= f.blocks || used[b] {
				f.t.Errorf("seq %d: block %d out of range or shared", s.Seq, b)
			}
			used[b] = true
		}
		l := ""
		if s.Logits {
			l = "L"
		}
		pass = append(pass, fmt.Sprintf("%d@%d:%v%s", s.Seq, s.Pos, s.Tokens, l))
	}
	f.passes = append(f.passes, pass)
	return f.markovBackend.Forward(ctx, seqs, logits)
}

func newPaged(t *testing.T, bs, blocks int) *pagedMarkov {
	return &pagedMarkov{markovBackend: markovBackend{table: markovTable}, bs: bs, blocks: blocks, t: t}
}

// TestDraftModel drives a DraftModel over the Markov chain (after token t
// the argmax is t+1 mod 8): what it feeds at which position, what it
// keeps across calls (the common prefix with the new history), that all
// drafting sequences share one pass per draft position, and the blocks.
func TestDraftModel(t *testing.T) {
	f := newPaged(t, 4, 8)
	d, err := NewDraftModel(f, 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	draft := func(reqs ...batch.DraftRequest) [][]int32 {
		t.Helper()
		f.passes = nil
		if err := d.Draft(ctx, reqs); err != nil {
			t.Fatal(err)
		}
		var out [][]int32
		for _, r := range reqs {
			out = append(out, r.Out)
		}
		return out
	}
	check := func(name string, got, want any) {
		t.Helper()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}

	// A new sequence: its whole history, then one pass per further draft.
	out := draft(batch.DraftRequest{Seq: 1, History: []int32{0, 1, 2}, Max: 3})
	check("first drafts", out, [][]int32{{3, 4, 5}})
	check("first passes", f.passes, [][]string{{"1@0:[0 1 2]L"}, {"1@3:[3]L"}, {"1@4:[4]L"}})

	// Drafts 3 and 4 accepted, then the target chose 7: the draft K/V of
	// 0..4 stay, only 7 is fed. A second sequence joins the same passes.
	out = draft(
		batch.DraftRequest{Seq: 1, History: []int32{0, 1, 2, 3, 4, 7}, Max: 2, Out: []int32{7}},
		batch.DraftRequest{Seq: 2, History: []int32{5}, Max: 3},
	)
	check("second drafts", out, [][]int32{{7, 0, 1}, {6, 7, 0}})
	check("second passes", f.passes, [][]string{{"1@5:[7]L", "2@0:[5]L"}, {"1@6:[0]L", "2@1:[6]L"}, {"2@2:[7]L"}})

	// The same history again: the last token is fed again for its logits.
	out = draft(batch.DraftRequest{Seq: 2, History: []int32{5}, Max: 1})
	check("repeat drafts", out, [][]int32{{6}})
	check("repeat passes", f.passes, [][]string{{"2@0:[5]L"}})

	// Forget gives every block back.
	d.Forget(1)
	d.Forget(2)
	d.Forget(99)
	if d.Sequences() != 0 || d.FreeBlocks() != 8 {
		t.Errorf("after Forget: %d sequences, %d of 8 blocks free", d.Sequences(), d.FreeBlocks())
	}
}

// TestDraftModelPoolFull: drafts shrink to the blocks left; a sequence
// whose history does not fit gets none and holds nothing; the target is
// never kept waiting.
func TestDraftModelPoolFull(t *testing.T) {
	f := newPaged(t, 4, 3) // 12 positions
	d, err := NewDraftModel(f, 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	reqs := []batch.DraftRequest{
		{Seq: 1, History: []int32{0, 1, 2, 3, 4, 5, 6, 7, 0, 1}, Max: 5},
		{Seq: 2, History: []int32{3}, Max: 2},
	}
	if err := d.Draft(context.Background(), reqs); err != nil {
		t.Fatal(err)
	}
	// 10 history positions and 2 fed drafts fill 12; the third draft is
	// not fed.
	if diff := cmp.Diff([][]int32{{2, 3, 4}, nil}, [][]int32{reqs[0].Out, reqs[1].Out}); diff != "" {
		t.Errorf("drafts (-want +got):\n%s", diff)
	}
	if d.Sequences() != 1 || d.FreeBlocks() != 0 {
		t.Errorf("%d sequences, %d blocks free; want 1 and 0", d.Sequences(), d.FreeBlocks())
	}
	d.Forget(1)
	if d.FreeBlocks() != 3 {
		t.Errorf("after Forget %d of 3 blocks free", d.FreeBlocks())
	}
}

// TestDraftModelCatchUp: a history longer than the chunk is fed over
// several calls, drafting nothing until it is all in; a failed pass
// drafts nothing and the next call feeds what it missed.
func TestDraftModelCatchUp(t *testing.T) {
	f := newPaged(t, 4, 8)
	d, err := NewDraftModel(f, 8, 4)
	if err != nil {
		t.Fatal(err)
	}
	hist := []int32{0, 1, 2, 3, 4, 5, 6, 7, 0, 1}
	var got []string
	for range 3 {
		f.passes = nil
		r := []batch.DraftRequest{{Seq: 1, History: hist, Max: 2}}
		if err := d.Draft(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(r[0].Out, f.passes))
	}
	want := []string{
		"[] [[1@0:[0 1 2 3]]]",
		"[] [[1@4:[4 5 6 7]]]",
		"[2 3] [[1@8:[0 1]L] [1@10:[2]L]]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	// A failing pass: nothing drafted, and the state holds only what
	// was fed.
	hist = append(hist, 2, 3, 5)
	f.fail = true
	r := []batch.DraftRequest{{Seq: 1, History: hist, Max: 2}}
	if err := d.Draft(context.Background(), r); err == nil || len(r[0].Out) != 0 {
		t.Fatalf("failing backend: err %v, drafts %v", err, r[0].Out)
	}
	f.passes = nil
	if err := d.Draft(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int32{6, 7}, r[0].Out); diff != "" {
		t.Errorf("after the failure (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]string{{"1@11:[3 5]L"}, {"1@13:[6]L"}}, f.passes); diff != "" {
		t.Errorf("after the failure, passes (-want +got):\n%s", diff)
	}
}
