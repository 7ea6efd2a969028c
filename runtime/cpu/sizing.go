package cpu

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/llama"
)

// Pool sizing defaults.
const (
	// DefaultBlockSize is the number of token positions per KV block.
	DefaultBlockSize = batch.DefaultBlockSize
	// RAMFraction is the share of RAM that weights and KV may take together
	// when the pool is sized from RAM (PoolConfig.KVMemory 0).
	RAMFraction = 0.5
	// DefaultMaxSeqs is the number of full contexts the pool sized from RAM
	// holds at most; it is the scheduler's MaxSeqs default.
	DefaultMaxSeqs = batch.DefaultMaxSeqs
)

// ErrNoRoom is returned when the budget leaves no room for a single KV
// block: batch.ErrNoKVRoom, the error of every pool sizing.
var ErrNoRoom = batch.ErrNoKVRoom

// PoolConfig is what PlanPool needs to size the KV pool (separate from the
// model so that tests can size hypothetical machines).
type PoolConfig struct {
	// KVMemory is a byte budget for the KV pool (--kv-memory); 0 sizes the
	// pool from RAM.
	KVMemory int64
	// TotalRAM is the machine's memory (SystemMemory); 0 means unknown, and
	// only the MaxSeqs x ContextLen cap applies.
	TotalRAM uint64
	// WeightsBytes is the memory the model's weights take in RAM (they are
	// usually memory-mapped and count against RAMFraction too).
	WeightsBytes uint64
	// Layers, KVDim (KV heads x head dim) and ContextLen are the model's.
	Layers, KVDim, ContextLen int
	// MaxSeqs bounds the pool sized from RAM to MaxSeqs full contexts, so
	// that a tiny model never gets gigabytes; 0 means DefaultMaxSeqs.
	MaxSeqs int
	// BlockSize is the number of positions per block; 0 means DefaultBlockSize.
	BlockSize int
	// KVType is the cache element type, "f16" (default), "f32" or "q8_0",
	// as in Config.
	KVType string
	// Windows are the layers' sliding windows (one per layer, 0: none) for
	// a pool laid out in layer groups (Config.SlidingKV): a block then
	// holds a group's layers and a sequence holds a window group's blocks
	// only for its window (batch.SeqBlocks). Nil: every layer keeps the
	// whole context, one table per sequence.
	Windows []int
}

func (c *PoolConfig) validate() error {
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.MaxSeqs == 0 {
		c.MaxSeqs = DefaultMaxSeqs
	}
	if c.KVType == "" {
		c.KVType = "f16"
	}
	switch {
	case c.KVType != "f16" && c.KVType != "f32" && c.KVType != "q8_0":
		return fmt.Errorf("cpu: KVType %q (want f16, f32 or q8_0)", c.KVType)
	case c.BlockSize < 0 || c.MaxSeqs < 0 || c.KVMemory < 0:
		return fmt.Errorf("cpu: negative pool config %+v", *c)
	case c.Layers <= 0 || c.KVDim <= 0 || c.ContextLen <= 0:
		return fmt.Errorf("cpu: model shape layers %d, kv dim %d, context %d must be positive", c.Layers, c.KVDim, c.ContextLen)
	case c.KVType == "q8_0" && c.KVDim%kernels.KVQ8Block != 0:
		return fmt.Errorf("cpu: KVType q8_0 needs KV rows of a multiple of %d elements, not %d", kernels.KVQ8Block, c.KVDim)
	case c.Windows != nil && len(c.Windows) != c.Layers:
		return fmt.Errorf("cpu: %d layer windows for %d layers", len(c.Windows), c.Layers)
	}
	return nil
}

// kvBlockBytes is the memory of one block of layers layers of kvDim K and
// V elements per position in cache type typ (batch.KVBytesPerBlock at the
// type's element size; a Q8_0 element is a byte and a 32nd of a float32
// scale).
func kvBlockBytes(layers, kvDim, blockSize int, typ string) int64 {
	switch typ {
	case "f32":
		return batch.KVBytesPerBlock(layers, kvDim, blockSize, 4)
	case "q8_0":
		return batch.KVBytesPerBlock(layers, kvDim, blockSize, 1) +
			batch.KVBytesPerBlock(layers, kvDim/kernels.KVQ8Block, blockSize, 4)
	}
	return batch.KVBytesPerBlock(layers, kvDim, blockSize, 2)
}

// PlanPool sizes the CPU KV pool. With KVMemory it is exactly
// floor(KVMemory / bytes-per-block) blocks. Without, the budget is
// RAMFraction of TotalRAM less the weights, capped at what MaxSeqs
// sequences of the full context need (batch.SeqBlocks: with Windows, a
// window group's blocks count only for its window). It fails with
// ErrNoRoom (wrapped, with the arithmetic) when not one block fits.
//
// A block's size is that of one layer group (Layout), so with sliding
// windows the budget is not split between window and global layers: the
// blocks are interchangeable and serve whichever group needs them.
func PlanPool(c PoolConfig) (batch.Plan, error) {
	if err := c.validate(); err != nil {
		return batch.Plan{}, err
	}
	lay := c.Layout()
	per := uint64(kvBlockBytes(lay.Size, c.KVDim, c.BlockSize, c.KVType))
	if c.KVMemory > 0 {
		p, err := blocksFor(uint64(c.KVMemory), per, c.BlockSize)
		if err != nil {
			return p, fmt.Errorf("--kv-memory: %w", err)
		}
		p.Explain += " (--kv-memory)" + groupsWhy(c, lay)
		return p, nil
	}
	capBlocks := uint64(c.MaxSeqs) * uint64(batch.SeqBlocks(lay.Windows, c.BlockSize, c.ContextLen))
	capBytes := capBlocks * per
	budget, why := capBytes, fmt.Sprintf("max-seqs %d x context %d", c.MaxSeqs, c.ContextLen)
	if c.TotalRAM > 0 {
		ram, err := ramBudget(c.TotalRAM, c.WeightsBytes, RAMFraction)
		if err != nil {
			return batch.Plan{}, fmt.Errorf("sizing the KV pool from RAM (set --kv-memory): %w", err)
		}
		if ram < capBytes {
			budget = ram
			why = fmt.Sprintf("%.2f x %s RAM less %s weights", RAMFraction, batch.GiB(c.TotalRAM), batch.GiB(c.WeightsBytes))
		}
	}
	p, err := blocksFor(budget, per, c.BlockSize)
	if err != nil {
		return p, err
	}
	p.Explain += " (" + why + ")" + groupsWhy(c, lay)
	return p, nil
}

// groupsWhy ends the plan's log line for a pool laid out in layer groups:
// what a block holds, and what one sequence of the full context takes.
func groupsWhy(c PoolConfig, lay batch.KVLayout) string {
	if lay.Windows == nil {
		return ""
	}
	return fmt.Sprintf("; blocks serve %s: a sequence of %d positions holds at most %d blocks",
		lay, c.ContextLen, batch.SeqBlocks(lay.Windows, c.BlockSize, c.ContextLen))
}

// Layout is the layer groups of the pool c plans (batch.NewKVLayout of
// Windows; one group of every layer without them).
func (c PoolConfig) Layout() batch.KVLayout {
	if c.Windows == nil {
		return batch.NewKVLayout(make([]int, c.Layers), false)
	}
	return batch.NewKVLayout(c.Windows, true)
}

// blocksFor sizes the pool from a byte budget (batch.PlanBlocks).
func blocksFor(budget, perBlock uint64, blockSize int) (batch.Plan, error) {
	return batch.PlanBlocks(budget, perBlock, blockSize, "kv pool (cpu): budget")
}

// ramBudget returns the KV budget in bytes as a fraction of totalRAM, less
// the weights held in RAM.
func ramBudget(totalRAM, weightsBytes uint64, fraction float64) (uint64, error) {
	b := uint64(fraction * float64(totalRAM))
	if b <= weightsBytes {
		return 0, fmt.Errorf("%w: %.2f x %s RAM = %s does not exceed the %s of weights", ErrNoRoom, fraction, batch.GiB(totalRAM), batch.GiB(b), batch.GiB(weightsBytes))
	}
	return b - weightsBytes, nil
}

// SystemMemory returns the memory this process may use, in bytes:
// MemTotal from /proc/meminfo, or the container's memory limit where
// /sys/fs/cgroup shows a smaller one (cgroup v2's memory.max, v1's
// memory.limit_in_bytes), so that a pod sized below its node is planned
// for what it may hold.
func SystemMemory() (uint64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("cpu: read meminfo: %w", err)
	}
	total, err := parseMemTotal(data)
	if err != nil {
		return 0, err
	}
	if limit, _, ok := cgroupMemory("/sys/fs/cgroup"); ok {
		total = min(total, limit)
	}
	return total, nil
}

// AvailableMemory is the memory this process can add now without swapping
// or being killed, in bytes: what the kernel estimates can be given to
// programs (MemAvailable in /proc/meminfo: free pages and the reclaimable
// page cache), and no more than the container's memory limit less its
// anonymous memory, where /sys/fs/cgroup shows a limit (cgroup v2's
// memory.max, or v1's memory.limit_in_bytes: a container's own cgroup).
// Linux only.
func AvailableMemory() (uint64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("cpu: read meminfo: %w", err)
	}
	avail, err := parseMeminfo(data, "MemAvailable")
	if err != nil {
		return 0, err
	}
	if room, ok := cgroupHeadroom("/sys/fs/cgroup"); ok {
		avail = min(avail, room)
	}
	return avail, nil
}

// cgroupHeadroom is the cgroup under root's memory limit less its
// anonymous memory (its page cache can be reclaimed), ok false where no
// limit is set or none can be read.
func cgroupHeadroom(root string) (uint64, bool) {
	limit, anon, ok := cgroupMemory(root)
	if !ok {
		return 0, false
	}
	return limit - min(anon, limit), true
}

// cgroupMemory reads the memory limit and the anonymous memory of the
// cgroup under root (v2, else v1), ok false where no limit is set or none
// can be read.
func cgroupMemory(root string) (limit, anon uint64, ok bool) {
	for _, v := range []struct{ limit, stat, anon string }{
		{"memory.max", "memory.stat", "anon"},                               // v2
		{"memory/memory.limit_in_bytes", "memory/memory.stat", "total_rss"}, // v1
	} {
		b, err := os.ReadFile(root + "/" + v.limit)
		if err != nil {
			continue
		}
		limit, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
		if err != nil || limit >= 1<<62 { // "max", or v1's page-rounded int64 maximum
			return 0, 0, false
		}
		if st, err := os.ReadFile(root + "/" + v.stat); err == nil {
			sc := bufio.NewScanner(bytes.NewReader(st))
			for sc.Scan() {
				if f := bytes.Fields(sc.Bytes()); len(f) == 2 && string(f[0]) == v.anon {
					anon, _ = strconv.ParseUint(string(f[1]), 10, 64)
				}
			}
		}
		return limit, anon, true
	}
	return 0, 0, false
}

func parseMemTotal(data []byte) (uint64, error) { return parseMeminfo(data, "MemTotal") }

// parseMeminfo is the value of /proc/meminfo's line key, in bytes.
func parseMeminfo(data []byte, key string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == key+":" {
			kb, err := strconv.ParseUint(string(f[1]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cpu: meminfo %s %q: %w", key, f[1], err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("cpu: no %s in meminfo", key)
}

// StepScratchBytes is the memory the CPU backend's per-step buffers take for
// a step of tokens positions of which logits return logits: the
// activations (backend.grow) and, for a mixture-of-experts model, the
// routing and expert-grouped buffers (moeScratch.grow), as those functions
// size them for exactly that step. The buffers grow to the largest step
// seen (doubling), so a server's steady figure is at most twice this for
// its largest step. The attention workers' per-thread scratch comes on
// top: F32 copies of one sequence's K and V for one KV head and the score
// rows of one tile of a prompt chunk's tokens (kernels.AttendChunkScratch),
// bounded by the context, not the batch.
func StepScratchBytes(hp llama.HParams, tokens, logits int) uint64 {
	qDim, kvDim := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	const bases = 2 // rotary tables: at most two bases (gemma3's local and global layers)
	f32 := 3*hp.Dim + 2*qDim + 2*kvDim + 2*hp.FFN + hp.HeadDim*bases + max(hp.Dim, hp.FFN, hp.MoE.FFN, qDim)
	u16 := max(hp.Dim, hp.FFN, hp.MoE.FFN, qDim, 2*kvDim)
	n := uint64(tokens)*uint64(4*f32+2*u16) + uint64(logits)*uint64(4*(hp.Dim+hp.VocabSize))
	if e, k := hp.MoE.Experts, hp.MoE.Used; e > 0 {
		// logits, weights (f32), selection and order (int32), grouped
		// inputs and outputs, gate and up, the per-choice outputs.
		per := 4 * (e + 2*k + k*hp.Dim + k)
		n += uint64(tokens) * uint64(per)
		n += uint64(moeRows(tokens, k)) * uint64(4*(2*hp.Dim+2*hp.MoE.FFN))
	}
	return n
}
