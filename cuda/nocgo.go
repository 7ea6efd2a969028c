//go:build !cgo

package cuda

import (
	"context"
	"fmt"
	"time"

	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/llama"
	"github.com/weft-inference/weft/runtime/sample"
)

// This file keeps the package's API when weft is built with CGO_ENABLED=0:
// there is no shim to load the driver with, so Open reports ErrNoDriver and
// the binary runs the CPU backend.

// Compiled reports whether this build has the CUDA backend (the C shim
// needs cgo); the GPU itself is found at run time by Open.
const Compiled = false

// Device is an opened GPU; without cgo none can be opened.
type Device struct{}

// Open always fails with ErrNoDriver in a binary built without cgo.
func Open(cfg Config) (*Device, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: weft was built without cgo", ErrNoDriver)
}

// Close does nothing.
func (d *Device) Close() error { return nil }

// Healthy reports false: there is no device.
func (d *Device) Healthy() (bool, string) { return false, "built without cgo" }

// Name is empty.
func (d *Device) Name() string { return "" }

// String is empty.
func (d *Device) String() string { return "" }

// ComputeCapability is (0, 0).
func (d *Device) ComputeCapability() (major, minor int) { return 0, 0 }

// TotalMemory is 0.
func (d *Device) TotalMemory() uint64 { return 0 }

// CUBLASVersion is 0.
func (d *Device) CUBLASVersion() int { return 0 }

// DriverVersion is 0.
func (d *Device) DriverVersion() int { return 0 }

// Backend runs a model on a GPU; without cgo none can be made.
type Backend struct{}

var _ batch.Backend = (*Backend)(nil)

// NewBackend fails with ErrNoDriver.
func NewBackend(dev *Device, m *llama.Model, kv KVConfig) (*Backend, error) {
	return nil, fmt.Errorf("%w: weft was built without cgo", ErrNoDriver)
}

// KV is empty.
func (b *Backend) KV() batch.KVInfo { return batch.KVInfo{} }

// Name is "cuda (unavailable)".
func (b *Backend) Name() string { return "cuda (unavailable)" }

// Plan is empty.
func (b *Backend) Plan() string { return "" }

// Healthy reports false.
func (b *Backend) Healthy() (bool, string) { return false, "built without cgo" }

// Forward fails with ErrNoDriver.
func (b *Backend) Forward(ctx context.Context, seqs []batch.SeqStep, logits [][]float32) error {
	return ErrNoDriver
}

// ForwardGreedy fails with ErrNoDriver.
func (b *Backend) ForwardGreedy(ctx context.Context, seqs []batch.SeqStep) ([]sample.Result, error) {
	return nil, ErrNoDriver
}

// Close does nothing.
func (b *Backend) Close() error { return nil }

// Graphs reports that no step has run.
func (b *Backend) Graphs() GraphStats { return GraphStats{Off: "built without cgo"} }

// Profile fails: there is no GPU path in this build.
func (b *Backend) Profile(ctx context.Context, seqs []batch.SeqStep) (map[string]time.Duration, error) {
	return nil, ErrNoDriver
}
