package main

import (
	"fmt"
	"log/slog"

	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/kernels"
)

// pickBackend builds the backend that --backend choice (auto, cpu, cuda)
// selects for the in-process commands (generate, bench --engine), and says
// why it is the one: cpu and cuda as asked (cuda fails without CUDA);
// auto takes CUDA when it opens, else the CPU with what CUDA answered.
// co configures the CUDA backend, cc the CPU one. invariant is
// --batch-invariant, which only the CPU backend runs: auto then refuses a
// CUDA backend that opens (errBatchInvariantCUDA).
func pickBackend(m *runtime.Model, choice string, invariant bool, co cudaOptions, cc cpu.Config) (batch.Backend, string, error) {
	why := "--backend " + choice
	if choice != "cpu" {
		b, err := newCUDABackend(m, co, slog.New(slog.DiscardHandler))
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
	}
	b, err := m.NewCPUBackend(cc)
	if err != nil {
		return nil, "", err
	}
	if invariant {
		why += "; " + batchInvariantWhy
	}
	return b, why, nil
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
