package main

import (
	"fmt"
	"log/slog"

	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/kernels"
	"github.com/weft-inference/weft/runtime/llama"
	"github.com/weft-inference/weft/scheduler"
)

// This file is the one place a backend is chosen: serve (newBackend) and
// the in-process commands (generate, bench --engine) all go through
// pickBackend.

// kvTypeUsage is --kv-type's help (serve, generate, bench --engine).
const kvTypeUsage = "KV cache element type on the CPU backend: f16, f32, or q8_0 (int8 with a float32 scale per 32 elements, " +
	"0.56x the memory of f16; the head dimension must be a multiple of 32). The CUDA backend caches f16, so other types run on the CPU " +
	"(--backend auto picks it)"

// checkKVType checks --kv-type against --backend: f16 runs everywhere; f32
// and q8_0 only on the CPU backend, so --backend cuda refuses them (and
// auto takes the CPU for them: kvBackend).
func checkKVType(kvType, backend string) error {
	switch kvType {
	case "f16":
		return nil
	case "f32", "q8_0":
		if backend == "cuda" {
			return fmt.Errorf("--kv-type %s runs on the CPU backend only (the CUDA backend caches f16): use --backend cpu or auto, or --kv-type f16", kvType)
		}
		return nil
	}
	return fmt.Errorf("--kv-type must be f16, f32 or q8_0, got %q", kvType)
}

// kvBackend is the --backend choice pickBackend gets: auto becomes cpu for
// a KV type only the CPU backend has.
func kvBackend(choice, kvType string) string {
	if choice == "auto" && kvType != "f16" && kvType != "" {
		return "cpu"
	}
	return choice
}

// kvBytesPerToken is the bytes elems K and V elements take in cache type
// kvType (a q8_0 element is a byte and a 32nd of a float32 scale).
func kvBytesPerToken(elems int, kvType string) int {
	switch kvType {
	case "f32":
		return 4 * elems
	case "q8_0":
		return elems * 9 / 8
	}
	return 2 * elems
}

// pickBackend builds the backend that --backend choice (auto, cpu, cuda)
// selects, and says why it is the one: cpu and cuda as asked (cuda fails
// without CUDA); auto takes CUDA when it opens, else the CPU with what CUDA
// answered. co configures the CUDA backend; cc gives the CPU one's config,
// called only when the CPU runs (serve sizes its pool from RAM there).
// invariant is --batch-invariant, which only the CPU backend runs: auto
// then refuses a CUDA backend that opens (errBatchInvariantCUDA). weights
// is --weights, carried out when the CPU runs (placeWeights). log gets
// CUDA's log lines and the fallback.
func pickBackend(m *runtime.Model, choice string, invariant bool, weights string, co cudaOptions, cc func() (cpu.Config, error), log *slog.Logger) (batch.Backend, string, error) {
	why := "--backend " + choice
	if choice != "cpu" {
		b, err := newCUDABackend(m, co, log)
		if err == nil {
			if invariant {
				b.Close()
				return nil, "", errBatchInvariantCUDA(why)
			}
			return b, why, nil
		}
		if choice == "cuda" {
			return nil, "", fmt.Errorf("--backend cuda: %w", err)
		}
		why = "--backend auto: CUDA unavailable: " + err.Error()
		log.Info("CUDA unavailable; using the CPU backend", "reason", err)
	}
	c, err := cc()
	if err != nil {
		return nil, "", err
	}
	b, err := m.NewCPUBackend(c)
	if err != nil {
		return nil, "", err
	}
	placed, err := placeWeights(m, weights, log)
	if err != nil {
		b.Close()
		return nil, "", err
	}
	if placed != "" {
		why += "; " + placed
	}
	if invariant {
		why += "; " + batchInvariantWhy
	}
	return b, why, nil
}

// newBackend picks serve's backend for m (pickBackend); why says why (for
// the log and GetModelInfo). On the CPU the KV pool is sized by
// cpu.PlanPool from --kv-memory or RAM.
func newBackend(c serveConfig, m *runtime.Model, log *slog.Logger) (b batch.Backend, why string, err error) {
	co := cudaOptions{KVBytes: c.KVMemory, Utilization: c.GPUMemUtil, MaxSeqs: c.MaxSeqs, MaxBatchTokens: c.MaxBatchTokens, Eager: c.CUDAEager}
	return pickBackend(m, kvBackend(c.Backend, c.KVType), c.BatchInvariant, c.Weights, co, func() (cpu.Config, error) { return servePool(c, m, log) }, log)
}

// servePool sizes serve's CPU KV pool (servePlan) and logs the plan.
func servePool(c serveConfig, m *runtime.Model, log *slog.Logger) (cpu.Config, error) {
	windows := make([]int, len(m.LM.Layers))
	for li, l := range m.LM.Layers {
		windows[li] = l.Window
	}
	plan, err := servePlan(c, m.HP, windows, weightsBytes(m), log)
	if err != nil {
		return cpu.Config{}, err
	}
	log.Info("kv pool sized", "plan", plan.String())
	return cpu.Config{BlockSize: plan.BlockSize, KVType: c.KVType, NumBlocks: plan.NumBlocks, SlidingKV: slidingKV(c)}, nil
}

// slidingKV says whether serve lays the CPU pool out in layer groups, so
// that sliding-window layers keep only their window (cpu.Config.SlidingKV):
// with continuous batching; static batching, the comparison baseline,
// keeps every layer's K/V for the whole run.
func slidingKV(c serveConfig) bool { return c.Batching != scheduler.BatchingStatic }

// servePlan is serve's CPU KV pool for a model of shape hp whose layers
// have sliding windows windows (llama.LayerWindows) and whose weights
// take weights bytes: cpu.PlanPool from --kv-memory or RAM. It is computed
// before the model loads too (estimateMemory), so it needs no model.
func servePlan(c serveConfig, hp llama.HParams, windows []int, weights uint64, log *slog.Logger) (batch.Plan, error) {
	pool := cpu.PoolConfig{
		KVMemory: c.KVMemory, WeightsBytes: weights,
		Layers: hp.Layers, KVDim: hp.KVHeads * hp.HeadDim, ContextLen: hp.ContextLen,
		MaxSeqs: c.MaxSeqs, KVType: c.KVType,
	}
	if slidingKV(c) {
		pool.Windows = windows
	}
	if c.KVMemory == 0 {
		ram, err := cpu.SystemMemory()
		if err != nil {
			log.Warn("RAM size unknown; KV pool capped by max-seqs x context only", "err", err)
		}
		pool.TotalRAM = ram
	}
	plan, err := cpu.PlanPool(pool)
	if err != nil {
		return plan, err
	}
	// The pool must hold one sequence of two blocks' positions.
	if need := batch.SeqBlocks(pool.Layout().Windows, plan.BlockSize, 2*plan.BlockSize); plan.NumBlocks < need {
		return plan, fmt.Errorf("KV pool of %d block(s) is too small; need at least %d: %s", plan.NumBlocks, need, plan)
	}
	return plan, nil
}

// weightsBytes is the size of m's tensors in its file (0 if unknown).
func weightsBytes(m *runtime.Model) uint64 {
	if m.File == nil {
		return 0
	}
	var n uint64
	for _, t := range m.File.Tensors {
		n += uint64(len(t.Data))
	}
	return n
}

// batchInvariantUsage is --batch-invariant's help in every command.
const batchInvariantUsage = "batch-invariant CPU kernels: a sequence's logits are the same bits alone or in any batch, " +
	"whatever its prompt chunking and its place in the batch (costs prompt and large-batch throughput: BENCHMARKS.md §1e); " +
	"refused with the CUDA backend"

// batchInvariantWhy ends the backend's reason under --batch-invariant, so
// that logs, GetModelInfo and the generate and bench output say so.
const batchInvariantWhy = "--batch-invariant"

// errBatchInvariantCUDA refuses --batch-invariant with the CUDA backend
// (how: the --backend that chose it): the setting covers the CPU kernels
// (kernels.SetBatchInvariant and the CPU backend's attention), not CUDA's.
func errBatchInvariantCUDA(how string) error {
	return fmt.Errorf("--batch-invariant covers the CPU kernels only, not the CUDA backend's (%s); run it with --backend cpu", how)
}

// startBatchInvariant applies --batch-invariant at start-up, before the
// model runs: every product of the CPU backend then picks its kernel as for
// one token and attention runs per token (kernels.SetBatchInvariant), so a
// sequence's logits are the same bits alone or in any batch. The returned
// function restores the previous setting once nothing runs any more.
func startBatchInvariant(on bool) (restore func()) {
	if !on {
		return func() {}
	}
	prev := kernels.SetBatchInvariant(true)
	return func() { kernels.SetBatchInvariant(prev) }
}
