package cpu

import (
	"fmt"

	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/llama"
)

// Config configures the CPU backend.
type Config struct {
	// BlockSize is the number of token positions per KV block; 0 means
	// DefaultBlockSize.
	BlockSize int
	// NumBlocks is the number of blocks in the KV pool; 0 means enough for
	// four sequences of the model's full context length. PlanPool sizes it
	// from a memory budget or the machine's RAM.
	NumBlocks int
	// KVType is the cache element type: "f16" (default, like llama.cpp),
	// "f32", or "q8_0" (int8 elements and one float32 scale per 32 of
	// them, the values ggml's q8_0 cache holds: 1.125 bytes an element;
	// the head dimension must be a multiple of 32).
	KVType string
	// SlidingKV lays the pool out in layer groups (batch.NewKVLayout) so
	// that the blocks of sliding-window layers can go back to the pool once
	// no query sees them: every step then brings one block table per group
	// (batch.SeqStep.Tables, groups in batch.KVInfo.Windows). For a model
	// without sliding windows it changes nothing (one group, Blocks).
	// Off, every layer keeps the whole context in one table.
	SlidingKV bool
	// Threads is the thread count Name reports (default kernels.Workers()).
	// Attention and the matmuls share the kernels' worker pool, which has
	// kernels.SetWorkers' count of goroutines, or GOMAXPROCS at first use
	// (cmd/weft runs GOMAXPROCS one above it, so report the pool).
	Threads int
}

func (c *Config) validate(hp llama.HParams) error {
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.BlockSize < 1 || c.BlockSize > 4096 {
		return fmt.Errorf("cpu: BlockSize %d out of range [1, 4096]", c.BlockSize)
	}
	switch c.KVType {
	case "":
		c.KVType = "f16"
	case "f16", "f32":
	case "q8_0":
		if hp.HeadDim%kernels.KVQ8Block != 0 {
			return fmt.Errorf("cpu: KVType q8_0 needs a head dimension that is a multiple of %d; this model's is %d (use f16)", kernels.KVQ8Block, hp.HeadDim)
		}
	default:
		return fmt.Errorf("cpu: KVType %q (want f16, f32 or q8_0)", c.KVType)
	}
	if c.NumBlocks == 0 {
		c.NumBlocks = (4*hp.ContextLen + c.BlockSize - 1) / c.BlockSize
	}
	if c.NumBlocks < 1 || c.NumBlocks > 1<<24 {
		return fmt.Errorf("cpu: NumBlocks %d out of range", c.NumBlocks)
	}
	if c.Threads == 0 {
		c.Threads = kernels.Workers()
	}
	if c.Threads < 1 {
		return fmt.Errorf("cpu: Threads %d < 1", c.Threads)
	}
	return nil
}
