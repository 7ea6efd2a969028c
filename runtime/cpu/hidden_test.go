package cpu

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/kernels"
)

// TestHiddenStatesAreWhatTheHeadMultiplies: the hidden state Forward
// writes for a token is the vector the LM head turns into that token's
// logits (F32 weights: every logit is the dot product of an output row
// with it, to rounding), and asking for hidden states alone (no logits,
// the LM head skipped) writes the same bits.
func TestHiddenStatesAreWhatTheHeadMultiplies(t *testing.T) {
	m := loadModel(t, "synth/models/synth-256-F32.gguf")
	b, err := New(m, Config{KVType: "f32", BlockSize: 16, NumBlocks: 16})
	if err != nil {
		t.Fatal(err)
	}
	D, V := m.HP.Dim, m.HP.VocabSize
	if b.HiddenSize() != D {
		t.Fatalf("HiddenSize = %d, want the width %d", b.HiddenSize(), D)
	}
	prompt := invTokens(3, 21)
	hidden := make([]float32, len(prompt)*D)
	logits := make([]float32, V)
	st := batch.SeqStep{Tokens: prompt, Blocks: []int32{0, 1}, Logits: true, Hidden: hidden}
	if err := b.Forward(context.Background(), []batch.SeqStep{st}, [][]float32{logits}); err != nil {
		t.Fatal(err)
	}
	last := hidden[(len(prompt)-1)*D:]
	row := make([]float32, D)
	for v := range V {
		dequantRow(m.Output, v, row)
		var dot float64
		for i := range row {
			dot += float64(row[i]) * float64(last[i])
		}
		if d := math.Abs(dot - float64(logits[v])); d > 1e-3 {
			t.Fatalf("logit %d = %v, output row . hidden = %v (diff %g)", v, logits[v], dot, d)
		}
	}
	alone := make([]float32, len(prompt)*D)
	st = batch.SeqStep{Tokens: prompt, Blocks: []int32{2, 3}, Hidden: alone}
	if err := b.Forward(context.Background(), []batch.SeqStep{st}, [][]float32{nil}); err != nil {
		t.Fatal(err)
	}
	for i := range hidden {
		if math.Float32bits(hidden[i]) != math.Float32bits(alone[i]) {
			t.Fatalf("hidden[%d] = %v with logits, %v without", i, hidden[i], alone[i])
		}
	}
	st.Hidden = alone[:D]
	if err := b.Forward(context.Background(), []batch.SeqStep{st}, [][]float32{nil}); !errors.Is(err, ErrBadStep) {
		t.Errorf("a hidden slot of one row for %d tokens: err %v, want ErrBadStep", len(prompt), err)
	}
}

// TestHiddenStatesBatchInvariant: under kernels.SetBatchInvariant a
// sequence's hidden states are the same bits computed alone in one step as
// fed in chunks of 7 beside other sequences, at any place in the batch.
func TestHiddenStatesBatchInvariant(t *testing.T) {
	defer kernels.SetBatchInvariant(kernels.SetBatchInvariant(true))
	for _, typ := range []string{"F32", "Q8_0"} {
		m := loadModel(t, "synth/models/synth-256-"+typ+".gguf")
		b, err := New(m, Config{KVType: "f16", BlockSize: 16, NumBlocks: 64})
		if err != nil {
			t.Fatal(err)
		}
		D := m.HP.Dim
		prompt := invTokens(5, 40)
		want := make([]float32, len(prompt)*D)
		st := batch.SeqStep{Tokens: prompt, Blocks: []int32{0, 1, 2}, Hidden: want}
		if err := b.Forward(context.Background(), []batch.SeqStep{st}, [][]float32{nil}); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(prompt)*D)
		for step, pos := 0, 0; pos < len(prompt); step++ {
			n := min(7, len(prompt)-pos)
			target := batch.SeqStep{Tokens: prompt[pos : pos+n], Pos: pos, Blocks: []int32{10, 11, 12}, Hidden: got[pos*D : (pos+n)*D]}
			var seqs []batch.SeqStep
			for o := range 3 + step%4 {
				toks := invTokens(50+o+step, 2+(5*o+step)%11)
				seqs = append(seqs, batch.SeqStep{Seq: uint64(1 + o), Tokens: toks, Blocks: []int32{int32(20 + o)}, Logits: o%2 == 0})
			}
			at := step % (len(seqs) + 1)
			seqs = append(seqs[:at], append([]batch.SeqStep{target}, seqs[at:]...)...)
			logits := make([][]float32, len(seqs))
			for i, s := range seqs {
				if s.Logits {
					logits[i] = make([]float32, m.HP.VocabSize)
				}
			}
			if err := b.Forward(context.Background(), seqs, logits); err != nil {
				t.Fatal(err)
			}
			pos += n
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: hidden[%d] (token %d) = %v in chunks beside others, %v alone", typ, i, i/D, got[i], want[i])
			}
		}
	}
}
