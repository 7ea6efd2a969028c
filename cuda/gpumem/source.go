package gpumem

import "errors"

// ErrNoGPU means there is no usable NVIDIA GPU: NVML's library is missing or
// the driver is not loaded (or weft was built without cgo).
var ErrNoGPU = errors.New("gpumem: no NVIDIA GPU (NVML library or driver missing)")

// Info is one snapshot of a GPU.
type Info struct {
	// Name is the device name ("NVIDIA H200").
	Name string
	// Total, Free and Used are device memory in bytes as NVML reports them.
	Total, Free, Used uint64
	// Utilization is the fraction of the last sample period a kernel ran (0..1).
	Utilization float64
}

// Source yields snapshots of one GPU. NVML implements it; tests use fakes.
type Source interface {
	Snapshot() (Info, error)
}
