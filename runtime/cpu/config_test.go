package cpu

import (
	"testing"

	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/llama"
)

func TestConfigValidate(t *testing.T) {
	hp := llama.HParams{ContextLen: 100}
	var c Config
	if err := c.validate(hp); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	// Four contexts of 100 positions in blocks of 16: ceil(400/16) = 25.
	want := Config{BlockSize: DefaultBlockSize, NumBlocks: 25, KVType: "f16", Threads: kernels.Workers()}
	if c != want {
		t.Errorf("defaults = %+v, want %+v", c, want)
	}
	for _, bad := range []Config{
		{BlockSize: -1},
		{BlockSize: 8192},
		{KVType: "q8"},
		{NumBlocks: -3},
		{NumBlocks: 1<<24 + 1},
		{Threads: -1},
	} {
		c := bad
		if err := c.validate(hp); err == nil {
			t.Errorf("validate(%+v): no error", bad)
		}
	}
}
