package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-inference/weft/cuda"
	"github.com/weft-inference/weft/cuda/gpumem"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/scheduler"
)

// The CUDA backend is found at run time: cuda.Open dlopens libcuda and
// cuBLAS, so this file builds everywhere (without cgo cuda.Open reports that
// there is no driver) and `--backend auto` falls back to the CPU with the
// reason in the log and in GetModelInfo.
func init() { newCUDABackend = openCUDABackend }

// cudaBlockSize is the KV block size on the GPU (positions per block).
const cudaBlockSize = batch.DefaultBlockSize

func openCUDABackend(m *runtime.Model, o cudaOptions, log *slog.Logger) (batch.Backend, error) {
	dev, err := cuda.Open(cuda.Config{Device: o.Device, NoGraphs: o.Eager})
	if err != nil {
		return nil, err
	}
	kv := cuda.KVConfig{BlockSize: cudaBlockSize, Utilization: o.Utilization, MaxSeqs: o.MaxSeqs, MaxBatchTokens: o.MaxBatchTokens}
	if o.KVBytes > 0 {
		// --kv-memory pins the pool; otherwise the backend sizes it from
		// the GPU's memory (--gpu-memory-utilization of the total, as vLLM
		// does) and Plan shows the arithmetic.
		per := batch.KVBytesPerBlock(m.HP.Layers, m.HP.KVHeads*m.HP.HeadDim, cudaBlockSize, 2) // the GPU caches F16
		plan, err := batch.PlanBlocks(uint64(o.KVBytes), uint64(per), cudaBlockSize, "kv pool (gpu): --kv-memory")
		if err != nil {
			dev.Close()
			return nil, fmt.Errorf("--kv-memory: %w", err)
		}
		kv.NumBlocks = plan.NumBlocks
	}
	b, err := cuda.NewBackend(dev, m.LM, kv)
	if err != nil {
		dev.Close()
		return nil, err
	}
	graphs := "decode steps replayed from CUDA graphs"
	if off := b.Graphs().Off; off != "" {
		graphs = "off: " + off
	}
	log.Info("CUDA backend ready", "device", dev.String(), "kv_plan", b.Plan(), "graphs", graphs)
	cb := &cudaBackend{Backend: b, dev: dev}
	cb.watchMemory(o.Device, log)
	return cb, nil
}

// cudaBackend closes the device (and NVML) with the backend, and offers the
// NVML memory gate and gauges to serve (memoryWatcher). Healthy comes from
// the embedded *cuda.Backend (healthReporter).
type cudaBackend struct {
	*cuda.Backend
	dev  *cuda.Device
	nvml *gpumem.NVML
	gate *gpumem.Gate
	cols []prometheus.Collector
}

var (
	_ memoryWatcher  = (*cudaBackend)(nil)
	_ healthReporter = (*cudaBackend)(nil)
)

// watchMemory opens NVML for device index; without NVML (ErrNoGPU) or when
// the gate cannot be made it logs and serves without the gate.
func (c *cudaBackend) watchMemory(index int, log *slog.Logger) {
	src, err := gpumem.OpenNVML(index)
	if err != nil {
		if errors.Is(err, gpumem.ErrNoGPU) {
			log.Info("NVML unavailable: no GPU memory gauges or admission gate", "err", err)
		} else {
			log.Warn("NVML failed: no GPU memory gauges or admission gate", "err", err)
		}
		return
	}
	c.nvml = src
	c.cols = append(c.cols, gpumem.NewCollector(src))
	gate, err := gpumem.NewGate(src, gpumem.GateConfig{}, log)
	if err != nil {
		log.Warn("GPU memory admission gate off", "err", err)
		return
	}
	c.gate = gate
	c.cols = append(c.cols, gate)
}

// MemoryGate is the NVML admission gate, or nil.
func (c *cudaBackend) MemoryGate() scheduler.Capacity {
	if c.gate == nil {
		return nil
	}
	return c.gate
}

// MemoryCollectors are the NVML gauges and the gate's metrics.
func (c *cudaBackend) MemoryCollectors() []prometheus.Collector { return c.cols }

func (c *cudaBackend) Close() error {
	err := c.Backend.Close()
	if derr := c.dev.Close(); err == nil {
		err = derr
	}
	if c.nvml != nil {
		if nerr := c.nvml.Close(); err == nil {
			err = nerr
		}
	}
	return err
}
