package cuda

import (
	"fmt"

	"github.com/weft-inference/weft/runtime/batch"
)

// Config says where to find the GPU libraries and which device to use.
type Config struct {
	// Device is the CUDA device ordinal (0 = first GPU).
	Device int
	// LibDir, when set, is searched first for libcuda.so.1 and
	// libcublas.so.{13,12,11} (a toolkit's lib64 or a pip wheel's
	// nvidia/cublas/lib). The dynamic loader's path comes after it.
	LibDir string
	// NoDefaultSearch searches LibDir only, not the loader path (tests).
	NoDefaultSearch bool
	// NoGraphs launches every decode step's kernels one by one instead of
	// replaying the step from a CUDA graph (for comparison and debugging).
	NoGraphs bool
}

func (c *Config) validate() error {
	if c.Device < 0 {
		return fmt.Errorf("cuda: device ordinal %d is negative", c.Device)
	}
	if c.NoDefaultSearch && c.LibDir == "" {
		return fmt.Errorf("cuda: NoDefaultSearch without LibDir leaves nowhere to look")
	}
	return nil
}

// KVConfig shapes the backend's KV pool and activation workspace.
type KVConfig struct {
	// BlockSize is the number of token positions per KV block; 0 means
	// batch.DefaultBlockSize.
	BlockSize int
	// NumBlocks is the number of KV blocks; 0 sizes the pool from free
	// device memory with gpumem.BlocksForGPU and Utilization.
	NumBlocks int
	// Utilization is --gpu-memory-utilization, used when NumBlocks is 0;
	// 0 means 0.9.
	Utilization float64
	// MaxBatchTokens is the largest number of tokens in one step the
	// workspace is allocated for up front (it grows if a larger step comes);
	// 0 means batch.DefaultMaxBatchTokens.
	MaxBatchTokens int
	// MaxSeqs is the largest number of sequences per step the logits buffer
	// is allocated for up front; 0 means batch.DefaultMaxSeqs.
	MaxSeqs int
}

func (c *KVConfig) validate() error {
	if c.BlockSize == 0 {
		c.BlockSize = batch.DefaultBlockSize
	}
	if c.MaxBatchTokens == 0 {
		c.MaxBatchTokens = batch.DefaultMaxBatchTokens
	}
	if c.MaxSeqs == 0 {
		c.MaxSeqs = batch.DefaultMaxSeqs
	}
	switch {
	case c.BlockSize < 0 || c.NumBlocks < 0 || c.MaxBatchTokens < 0 || c.MaxSeqs < 0:
		return fmt.Errorf("cuda: negative kv config %+v", *c)
	case c.Utilization < 0 || c.Utilization > 1:
		return fmt.Errorf("cuda: gpu memory utilization %g is not in [0, 1]", c.Utilization)
	}
	return nil
}

// GraphStats counts the backend's CUDA graph use.
type GraphStats struct {
	Captures int    // steps captured into a new graph
	Replays  int    // steps run by replaying a graph
	Eager    int    // steps launched kernel by kernel
	Off      string // why graphs are off ("" while they are on)
}
