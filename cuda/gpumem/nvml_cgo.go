//go:build cgo

package gpumem

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlDevice is the part of nvml.Device weft uses.
type nvmlDevice interface {
	GetName() (string, nvml.Return)
	GetMemoryInfo() (nvml.Memory, nvml.Return)
	GetUtilizationRates() (nvml.Utilization, nvml.Return)
}

// nvmlLib is the part of nvml.Interface weft uses.
type nvmlLib interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	DeviceGetCount() (int, nvml.Return)
	handle(i int) (nvmlDevice, nvml.Return)
}

type realNVML struct{ lib nvml.Interface }

func (r realNVML) Init() nvml.Return                  { return r.lib.Init() }
func (r realNVML) Shutdown() nvml.Return              { return r.lib.Shutdown() }
func (r realNVML) DeviceGetCount() (int, nvml.Return) { return r.lib.DeviceGetCount() }
func (r realNVML) handle(i int) (nvmlDevice, nvml.Return) {
	d, ret := r.lib.DeviceGetHandleByIndex(i)
	return d, ret
}

// NVML is a Source backed by NVML for one device. Its methods are safe for
// concurrent use.
type NVML struct {
	mu     sync.Mutex
	lib    nvmlLib
	dev    nvmlDevice
	index  int
	closed bool
}

var _ Source = (*NVML)(nil)

// OpenNVML opens NVML (go-nvml dlopens libnvidia-ml.so.1 now, at run time)
// and selects device index. It returns an error wrapping ErrNoGPU when the
// library is missing, the driver is not loaded or there is no such device.
func OpenNVML(index int) (*NVML, error) {
	return openNVML(realNVML{lib: nvml.New()}, index)
}

func openNVML(lib nvmlLib, index int) (*NVML, error) {
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_NO_PERMISSION:
		return nil, fmt.Errorf("%w: nvml init: %s", ErrNoGPU, ret.String())
	default:
		return nil, fmt.Errorf("gpumem: nvml init: %s", ret.String())
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, fmt.Errorf("gpumem: nvml device count: %s", ret.String())
	}
	if index < 0 || index >= n {
		lib.Shutdown()
		return nil, fmt.Errorf("%w: device %d requested, %d present", ErrNoGPU, index, n)
	}
	dev, ret := lib.handle(index)
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, fmt.Errorf("gpumem: nvml device %d: %s", index, ret.String())
	}
	return &NVML{lib: lib, dev: dev, index: index}, nil
}

// Snapshot reads name, memory and utilisation now. A failed utilisation read
// (some devices do not report it) leaves Utilization at 0.
func (n *NVML) Snapshot() (Info, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return Info{}, fmt.Errorf("gpumem: nvml device %d: closed", n.index)
	}
	name, ret := n.dev.GetName()
	if ret != nvml.SUCCESS {
		return Info{}, fmt.Errorf("gpumem: nvml device %d name: %s", n.index, ret.String())
	}
	mem, ret := n.dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return Info{}, fmt.Errorf("gpumem: nvml device %d memory: %s", n.index, ret.String())
	}
	info := Info{Name: name, Total: mem.Total, Free: mem.Free, Used: mem.Used}
	if u, ret := n.dev.GetUtilizationRates(); ret == nvml.SUCCESS {
		info.Utilization = float64(u.Gpu) / 100
	}
	return info, nil
}

// Close shuts NVML down. Later Snapshots fail.
func (n *NVML) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("gpumem: nvml shutdown: %s", ret.String())
	}
	return nil
}
