package gpumem

import (
	"errors"
	"fmt"

	"github.com/weft-inference/weft/runtime/batch"
)

// DefaultUtilization is the default --gpu-memory-utilization: the fraction of
// the GPU's total memory weft may count on (weights, workspace and KV
// together, plus whatever was already in use when it started).
const DefaultUtilization = 0.9

// ErrNoRoom is returned when the budget leaves no room for a single KV
// block: batch.ErrNoKVRoom, the error of every pool sizing.
var ErrNoRoom = batch.ErrNoKVRoom

// GPUBudget is what BlocksForGPU needs to size the KV pool of a GPU.
type GPUBudget struct {
	// Total is the device's total memory in bytes.
	Total uint64
	// UsedAtStart is the memory in use on the device before weft loaded its
	// weights: other processes, the CUDA context, the driver's own reserve
	// (vLLM's "non-torch" memory).
	UsedAtStart uint64
	// WeightsBytes is the device memory the model's weights take.
	WeightsBytes uint64
	// WorkspaceBytes is the activation workspace for the largest batch.
	WorkspaceBytes uint64
	// BytesPerBlock is one KV block over all layers, K and V.
	BytesPerBlock uint64
	// BlockSize is the number of token positions per block (for the log line).
	BlockSize int
	// Utilization is the fraction of Total weft may count on; 0 means
	// DefaultUtilization. Must be in (0, 1].
	Utilization float64
}

func (b *GPUBudget) validate() error {
	if b.Utilization == 0 {
		b.Utilization = DefaultUtilization
	}
	switch {
	case b.Utilization < 0 || b.Utilization > 1:
		return fmt.Errorf("gpumem: gpu memory utilization %g is not in (0, 1]", b.Utilization)
	case b.Total == 0:
		return errors.New("gpumem: total device memory is 0")
	case b.BytesPerBlock == 0:
		return errors.New("gpumem: bytes per block is 0")
	case b.BlockSize <= 0:
		return fmt.Errorf("gpumem: block size %d must be positive", b.BlockSize)
	case b.UsedAtStart > b.Total:
		return fmt.Errorf("gpumem: used memory %d exceeds total %d", b.UsedAtStart, b.Total)
	}
	return nil
}

// BlocksForGPU returns how many KV blocks fit, the way vLLM sizes its pool:
//
//	budget    = utilization * total
//	available = budget - used_at_start - weights - workspace
//	blocks    = floor(available / bytes_per_block)
//
// It fails with ErrNoRoom (wrapped, with the arithmetic) when not one block
// fits.
func BlocksForGPU(b GPUBudget) (batch.Plan, error) {
	if err := b.validate(); err != nil {
		return batch.Plan{}, err
	}
	budget := uint64(b.Utilization * float64(b.Total))
	taken := b.UsedAtStart + b.WeightsBytes + b.WorkspaceBytes
	arith := fmt.Sprintf("%.2f x %s total = %s; minus %s in use at start, %s weights, %s workspace",
		b.Utilization, GiB(b.Total), GiB(budget), GiB(b.UsedAtStart), GiB(b.WeightsBytes), GiB(b.WorkspaceBytes))
	if taken >= budget || (budget-taken) < b.BytesPerBlock {
		return batch.Plan{}, fmt.Errorf("%w: %s leaves %s, less than one block of %d bytes (raise --gpu-memory-utilization or lower --max-batch-tokens)",
			ErrNoRoom, arith, signedGiB(int64(budget)-int64(taken)), b.BytesPerBlock)
	}
	avail := budget - taken
	return batch.PlanBlocks(avail, b.BytesPerBlock, b.BlockSize, "kv pool (gpu): "+arith+" leaves")
}

// GiB formats a byte count as GiB with two decimals (batch.GiB).
func GiB(b uint64) string { return batch.GiB(b) }

func signedGiB(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }
