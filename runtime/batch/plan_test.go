package batch

import (
	"errors"
	"strings"
	"testing"
)

func TestPlanBlocks(t *testing.T) {
	p, err := PlanBlocks(10<<20+5, 1<<20, 16, "budget")
	if err != nil {
		t.Fatal(err)
	}
	if p.NumBlocks != 10 || p.KVBytes != 10<<20 || p.Tokens != 160 || p.BytesPerBlock != 1<<20 || p.BlockSize != 16 {
		t.Errorf("PlanBlocks(10 MiB+5, 1 MiB, 16) = %+v, want 10 blocks, 10 MiB, 160 tokens", p)
	}
	if !strings.HasPrefix(p.String(), "budget: ") || !strings.Contains(p.String(), "10 blocks x 1048576 bytes") {
		t.Errorf("log line %q", p.String())
	}
	if p, _ := PlanBlocks(1<<62, 1, 16, "huge"); p.NumBlocks != MaxPoolBlocks {
		t.Errorf("huge budget: %d blocks, want the cap %d", p.NumBlocks, MaxPoolBlocks)
	}
	if _, err := PlanBlocks(1<<20-1, 1<<20, 16, "small"); !errors.Is(err, ErrNoKVRoom) {
		t.Errorf("budget below one block: err %v, want ErrNoKVRoom", err)
	}
	if _, err := PlanBlocks(1<<20, 0, 16, "zero"); err == nil || errors.Is(err, ErrNoKVRoom) {
		t.Errorf("zero bytes per block: err %v, want a shape error", err)
	}
}
