// Package gpumem decides how much GPU memory weft may take for its KV cache
// and watches the GPU while it runs. (The CPU pool is sized by runtime/cpu.)
//
// It has three parts, all usable without a GPU:
//
//   - Sizing (sizing.go): BlocksForGPU, a pure function that turns the
//     device's memory into a number of KV blocks by vLLM's rule
//     (num_blocks = (utilization*total - used_at_start - weights - workspace) /
//     bytes_per_block, the block's size from batch.KVBytesPerBlock). It
//     returns a Plan whose String is the log line with the arithmetic.
//   - Tracking (source.go, nvml_cgo.go, collector.go): a Source yields memory
//     snapshots. OpenNVML reads them from NVML through go-nvml, which dlopens
//     libnvidia-ml at run time; a machine without the library or the driver
//     gets ErrNoGPU. go-nvml is pinned at v0.12.4-1: v0.13's bundled nvml.h
//     (CUDA 13) marks functions DEPRECATED that the module's own cgo wrappers
//     call, so every cold build printed ~150 -Wdeprecated-declarations
//     warnings; the calls used here (init, device handle, memory and
//     utilization queries) are the same in both. Collector exports a Source as the Prometheus gauges
//     weft_gpu_memory_{used,total,free}_bytes and weft_gpu_utilization_ratio.
//   - Admission (gate.go): Gate.AdmitOK is the scheduler's optional capacity
//     gate. It pauses admission when free memory drops below a margin and
//     resumes only once free memory is back above a higher one (hysteresis),
//     so admission does not flap.
//
// Ownership: a Gate is called from the scheduler's goroutine only; a Collector
// may be scraped from any goroutine (it only reads its Source, and NVML is
// thread-safe). Nothing here imports the cgo CUDA shim, and the NVML adapter
// is built only with cgo (nvml_nocgo.go reports ErrNoGPU otherwise).
//
// Example (cmd/weft):
//
//	src, err := gpumem.OpenNVML(0)
//	if errors.Is(err, gpumem.ErrNoGPU) { /* CPU backend */ }
//	info, _ := src.Snapshot()
//	plan, err := gpumem.BlocksForGPU(gpumem.GPUBudget{Total: info.Total, UsedAtStart: info.Used, ...})
//	slog.Info(plan.String())
//	gate, _ := gpumem.NewGate(src, gpumem.GateConfig{}, logger)
//	prometheus.MustRegister(gpumem.NewCollector(src), gate)
package gpumem
