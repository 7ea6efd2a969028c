package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/gguf"
)

// weightsUsage is --weights' help (serve, generate, bench --engine).
const weightsUsage = "where the CPU backend reads the weights: memory (copied from the file's mapping into private anonymous memory " +
	"in transparent huge pages once the backend is built: the kernel cannot evict them, and decode streams them with fewer TLB misses), " +
	"mapped (in place in the file's read-only mapping: page cache, shared with other processes, evictable), or auto (memory when the " +
	"kernel offers transparent huge pages and the file fits in the available memory with 512 MiB to spare, else mapped). " +
	"The CUDA backend uploads the weights and leaves the file mapped"

// weightsSpare is the available memory auto leaves free after the copy.
const weightsSpare = 512 << 20

// checkWeights checks --weights ("" is auto).
func checkWeights(v string) error {
	switch v {
	case "", "auto", "memory", "mapped":
		return nil
	}
	return fmt.Errorf("--weights must be auto, memory or mapped, got %q", v)
}

// thpMode is the kernel's transparent huge page mode (always, madvise or
// never), "" where it cannot be read.
func thpMode() string {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.IndexByte(s, '['); i >= 0 {
		if j := strings.IndexByte(s[i:], ']'); j > 0 {
			return s[i+1 : i+j]
		}
	}
	return ""
}

// weightsDecision is what --weights mode does with a file of size bytes
// given the available memory (availErr when unknown) and the THP mode:
// copy it into memory or not, and why, for the log.
func weightsDecision(mode string, size int64, avail uint64, availErr error, thp string) (copyIt bool, why string) {
	switch mode {
	case "mapped":
		return false, "--weights mapped"
	case "memory":
		return true, "--weights memory"
	}
	switch {
	case thp != "always" && thp != "madvise":
		if thp == "" {
			thp = "unknown"
		}
		return false, "--weights auto: the kernel's transparent huge pages are " + thp
	case availErr != nil:
		return false, "--weights auto: available memory unknown: " + availErr.Error()
	case uint64(size)+weightsSpare > avail:
		return false, fmt.Sprintf("--weights auto: %s of weights would leave less than %s of the %s available",
			batch.GiB(uint64(size)), batch.GiB(weightsSpare), batch.GiB(avail))
	}
	return true, "--weights auto"
}

// placeWeights carries out --weights for a model the CPU backend serves,
// once that backend is built (its KV pool is resident then, so the
// available memory counts it), logs where the weights are and says it in
// a few words (for the backend's why; "" for the built-in model, which
// is made in memory). An explicit --weights memory that
// fails is an error; auto then keeps the mapping.
func placeWeights(m *runtime.Model, mode string, log *slog.Logger) (string, error) {
	if m.Synthetic {
		return "", nil
	}
	if p, ok := m.File.Placed(); ok { // placed by an earlier backend on this model
		return placedWhy(p, "placed when an earlier backend was built"), nil
	}
	var size int64
	if st, err := os.Stat(m.Path); err == nil {
		size = st.Size()
	}
	avail, availErr := cpu.AvailableMemory()
	copyIt, why := weightsDecision(mode, size, avail, availErr, thpMode())
	if !copyIt {
		log.Info("weights read in place from the file's mapping", "model", m.Name, "why", why)
		return "weights mapped (" + why + ")", nil
	}
	p, err := m.WeightsToMemory()
	if err != nil {
		if mode == "memory" {
			return "", fmt.Errorf("--weights memory: %w", err)
		}
		log.Warn("weights left in the file's mapping: the copy into memory failed", "model", m.Name, "err", err)
		return "weights mapped (the copy into memory failed: " + err.Error() + ")", nil
	}
	log.Info("weights copied into memory", "model", m.Name, "bytes", batch.GiB(uint64(p.Bytes)),
		"huge_pages", batch.GiB(uint64(p.HugePages)), "why", why)
	return placedWhy(p, why), nil
}

// placedWhy says where ToMemory put the weights, and why.
func placedWhy(p gguf.Placement, why string) string {
	return fmt.Sprintf("weights in memory, %s of %s in huge pages (%s)", batch.GiB(uint64(p.HugePages)), batch.GiB(uint64(p.Bytes)), why)
}
