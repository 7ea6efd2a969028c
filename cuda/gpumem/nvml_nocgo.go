//go:build !cgo

package gpumem

import "fmt"

// NVML is a Source backed by NVML. Without cgo it cannot be opened.
type NVML struct{}

var _ Source = (*NVML)(nil)

// OpenNVML always fails with ErrNoGPU: this binary was built without cgo.
func OpenNVML(index int) (*NVML, error) {
	return nil, fmt.Errorf("%w: built without cgo", ErrNoGPU)
}

// Snapshot fails: there is no NVML without cgo.
func (n *NVML) Snapshot() (Info, error) { return Info{}, ErrNoGPU }

// Close does nothing.
func (n *NVML) Close() error { return nil }
