//go:build cgo

package cuda

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/gguf"
)

func openFake(t *testing.T) *Device {
	t.Helper()
	dir := t.TempDir()
	buildFake(t, dir, "libcuda.so.1", fakeDriverSrc, driverSymbols(), "-DINIT_RESULT=0", "-DCOUNT=1")
	buildFake(t, dir, "libcublas.so.13", fakeBLASSrc, blasSymbols())
	d, err := Open(Config{LibDir: dir, NoDefaultSearch: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestBackendFakeDriver drives NewBackend, Forward and ForwardGreedy against
// the fake driver: it checks the host side (validation, index packing,
// workspace growth, sizing) without a GPU. The fake computes nothing.
func TestBackendFakeDriver(t *testing.T) {
	d := openFake(t)
	m := tinyModelNoT(gguf.TypeQ8_0)
	b, err := NewBackend(d, m, KVConfig{BlockSize: 4, MaxBatchTokens: 8, MaxSeqs: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Name(); got != "cuda (Fake GPU, sm_90, cuBLAS 13)" {
		t.Errorf("Name = %q", got)
	}
	kv := b.KV()
	// 0.9*80 GiB - 1 GiB in use at start, minus weights and workspace.
	if kv.NumBlocks < 1000 || kv.BytesPerBlock != batch.KVBytesPerBlock(m.HP.Layers, m.HP.KVHeads*m.HP.HeadDim, 4, 2) || kv.Type != "f16" {
		t.Errorf("KV = %+v", kv)
	}
	if !strings.Contains(b.Plan(), "blocks x") {
		t.Errorf("Plan = %q", b.Plan())
	}

	seqs := []batch.SeqStep{
		{Seq: 1, Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, Pos: 0, Blocks: []int32{0, 1, 2}, Logits: true},
		{Seq: 2, Tokens: []int32{5}, Pos: 6, Blocks: []int32{3, 4}},
		{Seq: 3, Tokens: []int32{7}, Pos: 2, Blocks: []int32{5}, Logits: true},
	}
	logits := [][]float32{make([]float32, 96), nil, make([]float32, 96)}
	if err := b.Forward(context.Background(), seqs, logits); err != nil {
		t.Fatalf("Forward: %v", err)
	}
	if b.wsT < 13 || b.wsS < 2 {
		t.Errorf("workspace not grown: %d tokens, %d rows", b.wsT, b.wsS)
	}
	out, err := b.ForwardGreedy(context.Background(), seqs)
	if err != nil || len(out) != 3 {
		t.Fatalf("ForwardGreedy = %v, %v", out, err)
	}

	bad := []struct {
		name string
		s    batch.SeqStep
		want string
	}{
		{"block outside pool", batch.SeqStep{Tokens: []int32{1}, Blocks: []int32{int32(kv.NumBlocks)}}, "not in the pool"},
		{"too few blocks", batch.SeqStep{Tokens: []int32{1, 2, 3, 4, 5}, Blocks: []int32{0}}, "do not cover"},
		{"token outside vocab", batch.SeqStep{Tokens: []int32{96}, Blocks: []int32{0}}, "vocabulary"},
		{"negative block", batch.SeqStep{Tokens: []int32{1}, Blocks: []int32{-1}}, "not in the pool"},
	}
	for _, tc := range bad {
		err := b.Forward(context.Background(), []batch.SeqStep{tc.s}, [][]float32{nil})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Forward = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if err := b.Forward(context.Background(), seqs, logits[:1]); err == nil {
		t.Error("Forward with too few logits slots: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Forward(ctx, seqs, logits); !errors.Is(err, context.Canceled) {
		t.Errorf("Forward with a cancelled context: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Forward(context.Background(), seqs, logits); !errors.Is(err, ErrClosed) {
		t.Errorf("Forward after Close: %v, want ErrClosed", err)
	}
}

func TestPlanStepPacking(t *testing.T) {
	d := openFake(t)
	b, err := NewBackend(d, tinyModelNoT(gguf.TypeF16), KVConfig{BlockSize: 4, NumBlocks: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	seqs := []batch.SeqStep{
		{Tokens: []int32{10, 11, 12}, Pos: 3, Blocks: []int32{7, 2}},
		{Tokens: []int32{20}, Pos: 0, Blocks: []int32{5}},
	}
	p, err := b.planStep(seqs, func(i int) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	m := b.hostMeta
	want := []int32{
		10, 11, 12, 20, // tokens
		3, 4, 5, 0, // pos
		0, 0, 0, 1, // seq
		7*4 + 3, 2*4 + 0, 2*4 + 1, 5 * 4, // slots
		2, 3, // out rows (last token of each)
		0, 2, // seq block-table offsets
		7, 2, 5, // block tables
	}
	if p.T != 4 || p.nout != 2 || p.maxLen != 6 {
		t.Errorf("plan = %+v", p)
	}
	if len(m) != len(want) {
		t.Fatalf("meta = %v, want %v", m, want)
	}
	for i := range want {
		if m[i] != want[i] {
			t.Fatalf("meta = %v, want %v", m, want)
		}
	}
}
