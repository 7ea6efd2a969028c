package batch

import (
	"errors"
	"fmt"
)

// Batch-shape defaults every backend and the scheduler share, so that a
// backend's up-front allocation matches what the scheduler will send it.
const (
	// DefaultMaxSeqs is the largest number of sequences in one step unless
	// configured otherwise.
	DefaultMaxSeqs = 256
	// DefaultMaxBatchTokens is the per-step token budget unless configured
	// otherwise (the scheduler raises it to MaxSeqs when that is larger, so
	// that every running sequence can decode in one step).
	DefaultMaxBatchTokens = 2048
	// MaxPoolBlocks bounds a KV pool's block count: it keeps
	// NumBlocks*BlockSize far from int overflow on every backend.
	MaxPoolBlocks = 1 << 24
)

// ErrNoKVRoom is returned (wrapped, with the arithmetic) by every KV pool
// sizing when its budget leaves no room for a single block.
var ErrNoKVRoom = errors.New("no memory left for the KV cache")

// Plan is a sized KV pool. Every backend's sizing (the CPU's from RAM or
// --kv-memory, the GPU's from device memory) ends in PlanBlocks, so the
// arithmetic and its log line have one owner.
type Plan struct {
	// NumBlocks is the number of KV blocks to allocate.
	NumBlocks int
	// BytesPerBlock is the size of one block (KVBytesPerBlock).
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

// PlanBlocks sizes a pool from a byte budget: floor(budget / perBlock)
// blocks, at most MaxPoolBlocks. why says where the budget came from; it
// heads the log line. It fails with ErrNoKVRoom when not one block fits.
func PlanBlocks(budget, perBlock uint64, blockSize int, why string) (Plan, error) {
	if perBlock == 0 || blockSize <= 0 {
		return Plan{}, fmt.Errorf("kv plan: %d bytes per block of %d positions", perBlock, blockSize)
	}
	if budget < perBlock {
		return Plan{}, fmt.Errorf("%w: %s leaves %s, less than one block of %d bytes", ErrNoKVRoom, why, GiB(budget), perBlock)
	}
	n := min(budget/perBlock, MaxPoolBlocks)
	p := Plan{
		NumBlocks:     int(n),
		BytesPerBlock: perBlock,
		BlockSize:     blockSize,
		KVBytes:       n * perBlock,
		Tokens:        int(n) * blockSize,
	}
	p.Explain = fmt.Sprintf("%s: %s -> %d blocks x %d bytes per block = %s, %d tokens of %d per block",
		why, GiB(budget), p.NumBlocks, perBlock, GiB(p.KVBytes), p.Tokens, blockSize)
	return p, nil
}

// GiB formats a byte count as GiB with two decimals.
func GiB(b uint64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }
