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

func openFake(t *testing.T) *Device { return openFakeWith(t, Config{}) }

// openFakeWith opens the fake driver with cfg's options (LibDir is set
// here); extra are -D flags for the fake driver.
func openFakeWith(t *testing.T, cfg Config, extra ...string) *Device {
	t.Helper()
	dir := t.TempDir()
	buildFake(t, dir, "libcuda.so.1", fakeDriverSrc, driverSymbols(), append([]string{"-DINIT_RESULT=0", "-DCOUNT=1"}, extra...)...)
	buildFake(t, dir, "libcublas.so.13", fakeBLASSrc, blasSymbols())
	cfg.LibDir, cfg.NoDefaultSearch = dir, true
	d, err := Open(cfg)
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

// TestGraphsFakeDriver follows the CUDA graph cache on the fake driver:
// decode steps are captured once per shape and replayed after, steps with
// prompt chunks launch eagerly, a workspace reallocation drops every graph,
// a failed capture turns graphs off and the step still runs, and
// Config.NoGraphs keeps them off.
func TestGraphsFakeDriver(t *testing.T) {
	ctx := context.Background()
	decode := func(b *Backend, pos ...int) {
		t.Helper()
		seqs := make([]batch.SeqStep, len(pos))
		logits := make([][]float32, len(pos))
		for i, p := range pos {
			blocks := make([]int32, p/16+1)
			for j := range blocks {
				blocks[j] = int32(i*20 + j)
			}
			seqs[i] = batch.SeqStep{Seq: uint64(i), Tokens: []int32{int32(3 + i)}, Pos: p, Blocks: blocks}
			logits[i] = make([]float32, 96)
		}
		if err := b.Forward(ctx, seqs, logits); err != nil {
			t.Fatalf("decode at %v: %v", pos, err)
		}
	}
	newB := func(d *Device) *Backend {
		m := tinyModelNoT(gguf.TypeF16)
		m.HP.ContextLen = 1024
		b, err := NewBackend(d, m, KVConfig{BlockSize: 16, NumBlocks: 128, MaxBatchTokens: 16, MaxSeqs: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	want := func(b *Backend, w GraphStats) {
		t.Helper()
		if g := b.Graphs(); g != w {
			t.Fatalf("graph stats %+v, want %+v", g, w)
		}
	}

	b := newB(openFake(t))
	prompt := []batch.SeqStep{{Seq: 0, Tokens: []int32{1, 2, 3, 4, 5}, Blocks: []int32{0}}}
	if err := b.Forward(ctx, prompt, [][]float32{make([]float32, 96)}); err != nil {
		t.Fatal(err)
	}
	want(b, GraphStats{Eager: 1})
	decode(b, 5, 9)
	decode(b, 6, 10)
	want(b, GraphStats{Eager: 1, Captures: 1, Replays: 1})
	decode(b, 7, 11, 3) // three sequences: a new shape
	decode(b, 127, 12)  // 128 keys: still one piece, the same graph
	decode(b, 128, 13)  // 129 keys: attention's grid is two deep
	decode(b, 8, 13)
	want(b, GraphStats{Eager: 1, Captures: 3, Replays: 3})
	// A step of 17 tokens grows the workspace: the graphs name the old one.
	big := []batch.SeqStep{{Seq: 0, Tokens: make([]int32, 17), Blocks: []int32{0, 1}}}
	if err := b.Forward(ctx, big, [][]float32{make([]float32, 96)}); err != nil {
		t.Fatal(err)
	}
	if len(b.graphs) != 0 {
		t.Errorf("%d graphs kept after the workspace grew", len(b.graphs))
	}
	decode(b, 9, 14)
	want(b, GraphStats{Eager: 2, Captures: 4, Replays: 3})

	// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED from cuStreamEndCapture.
	b = newB(openFakeWith(t, Config{}, "-DEND_CAPTURE_RESULT=901"))
	decode(b, 5, 9)
	decode(b, 6, 10)
	g := b.Graphs()
	if g.Captures != 0 || g.Eager != 2 || !strings.Contains(g.Off, "capture failed") {
		t.Errorf("after a failed capture: %+v", g)
	}
	if ok, why := b.Healthy(); !ok {
		t.Errorf("a failed capture made the device unhealthy: %s", why)
	}

	b = newB(openFakeWith(t, Config{NoGraphs: true}))
	decode(b, 5, 9)
	want(b, GraphStats{Eager: 1, Off: "off by configuration"})
}
