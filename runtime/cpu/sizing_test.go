package cpu

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlanPool(t *testing.T) {
	// 2 layers x kv dim 64 x 16 positions x K,V x f16 = 8 KiB per block.
	base := PoolConfig{Layers: 2, KVDim: 64, ContextLen: 512, BlockSize: 16}
	with := func(f func(*PoolConfig)) PoolConfig { in := base; f(&in); return in }
	const per = 8 << 10
	for _, tc := range []struct {
		name    string
		in      PoolConfig
		blocks  int
		wantErr error
	}{
		{"kv-memory exact", with(func(in *PoolConfig) { in.KVMemory = 64 * per }), 64, nil},
		{"kv-memory rounds down", with(func(in *PoolConfig) { in.KVMemory = 64*per + per - 1 }), 64, nil},
		{"kv-memory ignores the cap", with(func(in *PoolConfig) { in.KVMemory = 1 << 30; in.MaxSeqs = 1 }), (1 << 30) / per, nil},
		{"kv-memory below a block", with(func(in *PoolConfig) { in.KVMemory = per - 1 }), 0, ErrNoRoom},
		// 256 seqs x 32 blocks of context, far below half of 24 GiB.
		{"default capped by max-seqs x context", with(func(in *PoolConfig) { in.TotalRAM = 24 << 30 }), 256 * 32, nil},
		{"max-seqs 4", with(func(in *PoolConfig) { in.TotalRAM = 24 << 30; in.MaxSeqs = 4 }), 4 * 32, nil},
		{"RAM unknown: the cap", base, 256 * 32, nil},
		// Half of 64 MiB = 32 MiB, less 16 MiB of weights = 16 MiB = 2048 blocks.
		{"default limited by RAM", with(func(in *PoolConfig) { in.TotalRAM = 64 << 20; in.WeightsBytes = 16 << 20; in.ContextLen = 8192 }), 2048, nil},
		{"weights fill RAM", with(func(in *PoolConfig) { in.TotalRAM = 64 << 20; in.WeightsBytes = 40 << 20 }), 0, ErrNoRoom},
		{"block size defaults to 16", with(func(in *PoolConfig) { in.BlockSize = 0; in.KVMemory = 64 * per }), 64, nil},
	} {
		p, err := PlanPool(tc.in)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if p.NumBlocks != tc.blocks || p.BytesPerBlock != per || p.Tokens != tc.blocks*16 || p.KVBytes != uint64(tc.blocks)*per {
			t.Errorf("%s: %d blocks of %d bytes (%d tokens), want %d blocks of %d: %s", tc.name, p.NumBlocks, p.BytesPerBlock, p.Tokens, tc.blocks, per, p)
		}
		if !strings.Contains(p.String(), "per block") {
			t.Errorf("%s: plan %q lacks the arithmetic", tc.name, p)
		}
	}
}

// With layer windows (Config.SlidingKV) a block holds one layer group, and
// the cap counts a window group's blocks only for its window.
func TestPlanPoolWindows(t *testing.T) {
	// 6 layers, 4 sliding (window 64) and 2 global: groups of 2 layers,
	// 8 KiB per block as in TestPlanPool. A sequence of 512 positions
	// holds 32 blocks of the global group and 5 of each window group.
	in := PoolConfig{Layers: 6, KVDim: 64, ContextLen: 512, BlockSize: 16, MaxSeqs: 4,
		Windows: []int{64, 64, 0, 64, 64, 0}}
	p, err := PlanPool(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.BytesPerBlock != 8<<10 || p.NumBlocks != 4*(32+5+5) {
		t.Errorf("%d blocks of %d bytes, want %d of %d: %s", p.NumBlocks, p.BytesPerBlock, 4*42, 8<<10, p)
	}
	if !strings.Contains(p.String(), "3 groups of 2 layers") {
		t.Errorf("plan %q does not name the groups", p)
	}
	// No layer slides: as without windows.
	in.Windows = make([]int, 6)
	p, err = PlanPool(in)
	if err != nil || p.BytesPerBlock != 24<<10 || p.NumBlocks != 4*32 {
		t.Errorf("no sliding layer: %+v, %v", p, err)
	}
	in.Windows = []int{64}
	if _, err := PlanPool(in); err == nil {
		t.Errorf("1 window for 6 layers: no error")
	}
}

func TestPlanPoolF32AndBadConfigs(t *testing.T) {
	// An F32 cache doubles the block: 16 KiB.
	p, err := PlanPool(PoolConfig{Layers: 2, KVDim: 64, ContextLen: 512, KVType: "f32", KVMemory: 64 << 10})
	if err != nil || p.BytesPerBlock != 16<<10 || p.NumBlocks != 4 {
		t.Errorf("PlanPool f32 = %+v, %v; want 4 blocks of 16 KiB", p, err)
	}
	for _, c := range []PoolConfig{
		{Layers: 0, KVDim: 64, ContextLen: 512},
		{Layers: 2, KVDim: 64, ContextLen: 512, KVType: "q8"},
		{Layers: 2, KVDim: 64, ContextLen: 512, BlockSize: -1},
		{Layers: 2, KVDim: 64, ContextLen: 512, KVMemory: -1},
	} {
		if _, err := PlanPool(c); err == nil {
			t.Errorf("PlanPool(%+v): no error", c)
		}
	}
}

func TestRAMBudget(t *testing.T) {
	const gib = 1 << 30
	got, err := ramBudget(16*gib, 2*gib, 0.5)
	if err != nil || got != 6*gib {
		t.Errorf("ramBudget(16G, 2G, 0.5) = %d, %v; want %d", got, err, 6*gib)
	}
	if _, err := ramBudget(4*gib, 3*gib, 0.5); !errors.Is(err, ErrNoRoom) {
		t.Errorf("ramBudget with weights above budget: err %v, want ErrNoRoom", err)
	}
}

func TestCgroupHeadroom(t *testing.T) {
	write := func(dir, name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v2 := t.TempDir()
	write(v2, "memory.max", "17179869184\n")
	write(v2, "memory.stat", "anon 1073741824\nfile 8589934592\n")
	if got, ok := cgroupHeadroom(v2); !ok || got != 15<<30 {
		t.Errorf("v2 with a 16 GiB limit and 1 GiB anon: %d, %v; want 15 GiB", got, ok)
	}
	unlimited := t.TempDir()
	write(unlimited, "memory.max", "max\n")
	if got, ok := cgroupHeadroom(unlimited); ok {
		t.Errorf("v2 without a limit: %d, %v", got, ok)
	}
	v1 := t.TempDir()
	write(v1, "memory/memory.limit_in_bytes", "4294967296\n")
	write(v1, "memory/memory.stat", "rss 5\ntotal_rss 5368709120\n")
	if got, ok := cgroupHeadroom(v1); !ok || got != 0 {
		t.Errorf("v1 over its limit: %d, %v; want 0, true", got, ok)
	}
	write(v1, "memory/memory.limit_in_bytes", "9223372036854771712\n")
	if _, ok := cgroupHeadroom(v1); ok {
		t.Error("v1's unlimited value read as a limit")
	}
	if _, ok := cgroupHeadroom(t.TempDir()); ok {
		t.Error("no cgroup files read as a limit")
	}
}

func TestParseMemTotal(t *testing.T) {
	got, err := parseMemTotal([]byte("MemFree:  10 kB\nMemTotal:       24576000 kB\n"))
	if err != nil || got != 24576000*1024 {
		t.Errorf("parseMemTotal = %d, %v", got, err)
	}
	if _, err := parseMemTotal([]byte("nothing\n")); err == nil {
		t.Error("parseMemTotal without MemTotal: no error")
	}
	if n, err := SystemMemory(); err != nil || n == 0 {
		t.Errorf("SystemMemory = %d, %v", n, err)
	}
	if got, err := parseMeminfo([]byte("MemTotal: 9 kB\nMemAvailable:     123 kB\n"), "MemAvailable"); err != nil || got != 123*1024 {
		t.Errorf("parseMeminfo MemAvailable = %d, %v", got, err)
	}
	if n, err := AvailableMemory(); err != nil || n == 0 {
		t.Errorf("AvailableMemory = %d, %v", n, err)
	}
}
