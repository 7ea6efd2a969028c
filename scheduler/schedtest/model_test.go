package schedtest

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/sample"
)

// A prompt fed in two chunks, then decoded through the block table, gives
// Reference; reading the wrong blocks gives something else.
func TestModelReadsBackThroughBlocks(t *testing.T) {
	m := NewModel(2, 8)
	prompt := []int32{5, 6, 7}
	smp := sample.New(sample.Params{}, nil)
	blocks := []int32{3, 1}
	one := []*sample.Sampler{smp}
	steps := [][]batch.SeqStep{
		{{Seq: 1, Tokens: prompt[:2], Pos: 0, Blocks: blocks}},
		{{Seq: 1, Tokens: prompt[2:], Pos: 2, Blocks: blocks, Logits: true}},
	}
	var got []int32
	for _, st := range steps {
		smps := []*sample.Sampler{nil}
		if st[0].Logits {
			smps = one
		}
		res, err := m.Step(context.Background(), st, smps)
		if err != nil {
			t.Fatal(err)
		}
		if st[0].Logits {
			got = append(got, res[0].Token)
		}
	}
	res, err := m.Step(context.Background(), []batch.SeqStep{{Seq: 1, Tokens: got[:1], Pos: 3, Blocks: blocks, Logits: true}}, one)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, res[0].Token)
	if diff := cmp.Diff(Reference(prompt, 2, nil), got); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
	res, _ = m.Step(context.Background(), []batch.SeqStep{{Seq: 1, Tokens: got[1:2], Pos: 4, Blocks: []int32{1, 3, 0}, Logits: true}}, one)
	if res[0].Token == Reference(prompt, 3, nil)[2] {
		t.Errorf("swapped blocks gave the reference token %d", res[0].Token)
	}
	if err := m.Err(); err != nil {
		t.Errorf("Err = %v on well-formed rows", err)
	}
	m.Step(context.Background(), []batch.SeqStep{{Seq: 2, Tokens: []int32{1, 2, 3}, Pos: 0, Blocks: []int32{0}}}, []*sample.Sampler{nil})
	if m.Err() == nil {
		t.Errorf("a block table too short for its tokens was not reported")
	}
	m2 := NewModel(2, 8)
	m2.Step(context.Background(), []batch.SeqStep{{Seq: 1, Tokens: []int32{1}, Pos: 0, Blocks: []int32{0}}}, one)
	if m2.Err() == nil {
		t.Errorf("a sampler on a row without Logits was not reported")
	}
	if got, want := m.StepsOf(2), []int{5}; !cmp.Equal(got, want) {
		t.Errorf("StepsOf(2) = %v, want %v", got, want)
	}
}
