package gpumem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// DefaultUtilization is the default --gpu-memory-utilization: the fraction of
// the GPU's total memory weft may count on (weights, workspace and KV
// together, plus whatever was already in use when it started).
const DefaultUtilization = 0.9

// ErrNoRoom is returned when the budget leaves no room for a single KV block.
var ErrNoRoom = errors.New("gpumem: no memory left for the KV cache")

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

// Plan is the result of sizing a KV pool.
type Plan struct {
	// NumBlocks is the number of KV blocks to allocate.
	NumBlocks int
	// BytesPerBlock is the size of one block.
	BytesPerBlock uint64
	// BlockSize is the number of token positions per block.
	BlockSize int
	// KVBytes is NumBlocks * BytesPerBlock.
	KVBytes uint64
	// Tokens is NumBlocks * BlockSize: the positions that fit.
	Tokens int
	// Explain is the arithmetic, for the log.
	Explain string
}

// String is the log line with the arithmetic.
func (p Plan) String() string { return p.Explain }

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
func BlocksForGPU(b GPUBudget) (Plan, error) {
	if err := b.validate(); err != nil {
		return Plan{}, err
	}
	budget := uint64(b.Utilization * float64(b.Total))
	taken := b.UsedAtStart + b.WeightsBytes + b.WorkspaceBytes
	arith := fmt.Sprintf("%.2f x %s total = %s; minus %s in use at start, %s weights, %s workspace",
		b.Utilization, GiB(b.Total), GiB(budget), GiB(b.UsedAtStart), GiB(b.WeightsBytes), GiB(b.WorkspaceBytes))
	if taken >= budget || (budget-taken) < b.BytesPerBlock {
		return Plan{}, fmt.Errorf("%w: %s leaves %s, less than one block of %d bytes (raise --gpu-memory-utilization or lower --max-batch-tokens)",
			ErrNoRoom, arith, signedGiB(int64(budget)-int64(taken)), b.BytesPerBlock)
	}
	avail := budget - taken
	n := avail / b.BytesPerBlock
	return makePlan(n, b.BytesPerBlock, b.BlockSize, fmt.Sprintf("kv pool (gpu): %s = %s for kv", arith, GiB(avail))), nil
}

func makePlan(n, perBlock uint64, blockSize int, prefix string) Plan {
	const maxBlocks = 1 << 30 // keeps NumBlocks*BlockSize far from int overflow
	if n > maxBlocks {
		n = maxBlocks
	}
	p := Plan{
		NumBlocks:     int(n),
		BytesPerBlock: perBlock,
		BlockSize:     blockSize,
		KVBytes:       n * perBlock,
		Tokens:        int(n) * blockSize,
	}
	p.Explain = fmt.Sprintf("%s -> %d blocks x %d bytes per block = %s, %d tokens of %d per block",
		prefix, p.NumBlocks, perBlock, GiB(p.KVBytes), p.Tokens, blockSize)
	return p
}

// BlocksForCPU sizes the CPU KV pool from a byte budget (--kv-memory):
// blocks = floor(budget / bytes_per_block). It fails with ErrNoRoom when not
// one block fits.
func BlocksForCPU(budget, bytesPerBlock uint64, blockSize int) (Plan, error) {
	switch {
	case bytesPerBlock == 0:
		return Plan{}, errors.New("gpumem: bytes per block is 0")
	case blockSize <= 0:
		return Plan{}, fmt.Errorf("gpumem: block size %d must be positive", blockSize)
	case budget < bytesPerBlock:
		return Plan{}, fmt.Errorf("%w: kv memory budget %d bytes is less than one block of %d bytes", ErrNoRoom, budget, bytesPerBlock)
	}
	return makePlan(budget/bytesPerBlock, bytesPerBlock, blockSize, fmt.Sprintf("kv pool (cpu): budget %s", GiB(budget))), nil
}

// CPUBudget returns the KV budget in bytes as a fraction of totalRAM, less the
// weights held in RAM (they are usually memory-mapped and count too).
func CPUBudget(totalRAM, weightsBytes uint64, fraction float64) (uint64, error) {
	if fraction <= 0 || fraction > 1 {
		return 0, fmt.Errorf("gpumem: kv memory fraction %g is not in (0, 1]", fraction)
	}
	b := uint64(fraction * float64(totalRAM))
	if b <= weightsBytes {
		return 0, fmt.Errorf("%w: %.2f x %s RAM = %s does not exceed the %s of weights", ErrNoRoom, fraction, GiB(totalRAM), GiB(b), GiB(weightsBytes))
	}
	return b - weightsBytes, nil
}

// KVBytesPerBlock is the size of one KV block over all layers, K and V:
// 2 * layers * blockSize * kvDim * elemBytes (2 for an F16 cache, 4 for F32).
func KVBytesPerBlock(layers, kvDim, blockSize, elemBytes int) uint64 {
	return 2 * uint64(layers) * uint64(blockSize) * uint64(kvDim) * uint64(elemBytes)
}

// SystemMemory returns MemTotal from /proc/meminfo in bytes.
func SystemMemory() (uint64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("gpumem: read meminfo: %w", err)
	}
	return parseMemTotal(data)
}

func parseMemTotal(data []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "MemTotal:" {
			kb, err := strconv.ParseUint(string(f[1]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("gpumem: meminfo MemTotal %q: %w", f[1], err)
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("gpumem: no MemTotal in meminfo")
}

// GiB formats a byte count as GiB with two decimals.
func GiB(b uint64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }

func signedGiB(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }
