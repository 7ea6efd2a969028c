package main

import (
	"fmt"
	"log/slog"

	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
)

// pickBackend builds the backend that --backend choice (auto, cpu, cuda)
// selects for the in-process commands (generate, bench --engine), and says
// why it is the one: cpu and cuda as asked (cuda fails without CUDA);
// auto takes CUDA when this binary has it and it opens, else the CPU with
// what CUDA answered. co configures the CUDA backend, cc the CPU one.
func pickBackend(m *runtime.Model, choice string, co cudaOptions, cc cpu.Config) (batch.Backend, string, error) {
	why := "--backend " + choice
	if choice != "cpu" {
		switch {
		case newCUDABackend == nil && choice == "cuda":
			return nil, "", errNoCUDA
		case newCUDABackend == nil:
			why = "--backend auto: no CUDA support in this binary"
		default:
			b, err := newCUDABackend(m, co, slog.New(slog.DiscardHandler))
			if err == nil {
				return b, why, nil
			}
			if choice == "cuda" {
				return nil, "", fmt.Errorf("--backend cuda: %w", err)
			}
			why = "--backend auto: CUDA unavailable: " + err.Error()
		}
	}
	b, err := m.NewCPUBackend(cc)
	if err != nil {
		return nil, "", err
	}
	return b, why, nil
}
