package main

import (
	"fmt"
	"log/slog"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/llama"
	"github.com/weft-inference/weft/scheduler"
)

// memEstimate is the resident memory serve expects of a model on the CPU
// backend, worked out from the file's header before the model loads.
type memEstimate struct {
	// Weights are the tensors' bytes. Mapped from the file (--weights
	// mapped, or auto when they do not fit), they count as page cache that
	// the kernel may evict and read back, and every weight a step touches
	// becomes resident, which for a mixture-of-experts model is, over a few
	// steps, every expert. Copied into memory (placeWeights), all of them
	// are resident from the start.
	Weights uint64
	// WeightsMode is --weights: memory, mapped or auto.
	WeightsMode string
	// Experts is the part of Weights in stacked expert tensors (0 for a
	// dense model), with the share one token reads (Used of Count).
	Experts     uint64
	Used, Count int
	// KV is the KV pool serve will allocate (servePlan); its pages become
	// resident as sequences fill them.
	KV   batch.Plan
	Step uint64 // the per-step buffers for the largest step (cpu.StepScratchBytes)
	RAM  uint64 // the machine's memory (0: unknown)
}

// Total is weights, KV and step buffers together.
func (e memEstimate) Total() uint64 { return e.Weights + e.KV.KVBytes + e.Step }

// estimateMemory reads path's header (the file is mapped, not read) and
// returns what serving it with c on the CPU backend will hold.
func estimateMemory(c serveConfig, path string, log *slog.Logger) (memEstimate, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return memEstimate{}, err
	}
	defer f.Close()
	hp, err := llama.ReadHParams(f)
	if err != nil {
		return memEstimate{}, err
	}
	e := memEstimate{WeightsMode: c.Weights}
	for _, t := range f.Tensors {
		e.Weights += uint64(len(t.Data))
		if len(t.Dims) == 3 {
			e.Experts += uint64(len(t.Data))
		}
	}
	e.Used, e.Count = hp.MoE.Used, hp.MoE.Experts
	windows, err := llama.LayerWindows(f, hp)
	if err != nil {
		return e, err
	}
	if e.KV, err = servePlan(c, hp, windows, e.Weights, log); err != nil {
		return e, err
	}
	maxSeqs, maxTokens := scheduler.BatchShape(c.MaxSeqs, c.MaxBatchTokens)
	e.Step = 2 * cpu.StepScratchBytes(hp, maxTokens, maxSeqs) // buffers grow by doubling
	e.RAM, _ = cpu.SystemMemory()
	return e, nil
}

// weightsWhere says where --weights puts the weights.
func (e memEstimate) weightsWhere() string {
	switch e.WeightsMode {
	case "mapped":
		return " (memory-mapped from the file, not copied: --weights mapped)"
	case "memory":
		return " (copied into memory once the backend is built: --weights memory)"
	}
	return " (copied into memory once the backend is built when they fit, else memory-mapped: --weights auto)"
}

// log writes the estimate: one line, and a warning when it exceeds RAM.
func (e memEstimate) log(log *slog.Logger) {
	attrs := []any{
		"total", batch.GiB(e.Total()),
		"weights", batch.GiB(e.Weights) + e.weightsWhere(),
		"kv_pool", batch.GiB(e.KV.KVBytes) + fmt.Sprintf(" (%d tokens)", e.KV.Tokens),
		"step_buffers", batch.GiB(e.Step),
	}
	if e.Count > 0 {
		attrs = append(attrs, "experts", fmt.Sprintf("%s in %d experts, %d read per token; all become resident as tokens route to them",
			batch.GiB(e.Experts), e.Count, e.Used))
	}
	if e.RAM > 0 {
		attrs = append(attrs, "ram", batch.GiB(e.RAM))
	}
	log.Info("expected resident memory on the CPU backend", attrs...)
	if e.RAM > 0 && e.Total() > e.RAM {
		log.Warn("the model, its KV pool and step buffers exceed RAM: weights will be paged from the file as steps need them (slow); lower --kv-memory or use a smaller quantization",
			"total", batch.GiB(e.Total()), "ram", batch.GiB(e.RAM))
	}
}
