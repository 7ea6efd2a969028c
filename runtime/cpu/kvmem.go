package cpu

import (
	"runtime"
	"sync"
	"unsafe"
)

// kvMem is the KV pool's memory. On Linux it is mapped outside the Go heap
// (kvmem_linux.go): backed by transparent huge pages where the kernel
// allows them on request, and written once at allocation, so that no
// request pays the pool's first-touch page faults (without it, the first
// minutes of serving fault in the pool 4 KiB at a time as blocks are first
// handed out, on the step's critical path), and the GC's heap goal does not
// count it. Elsewhere it is ordinary Go memory.
type kvMem struct {
	mu      sync.Mutex
	regions [][]byte // mappings to unmap (the Go fallback keeps none)
}

// kvAlloc returns n zeroed elements of E from new memory.
func kvAlloc[E int8 | uint16 | float32](m *kvMem, n int) []E {
	var e E
	bytes := n * int(unsafe.Sizeof(e))
	if bytes == 0 {
		return nil
	}
	mapping, ok := kvMap(bytes)
	if !ok {
		return make([]E, n)
	}
	m.mu.Lock()
	m.regions = append(m.regions, mapping)
	m.mu.Unlock()
	return unsafe.Slice((*E)(unsafe.Pointer(unsafe.SliceData(mapping))), n)
}

// drop gives the physical memory back (Close): a stale slice still reads
// zeros rather than faulting, so a misuse after Close cannot crash.
func (m *kvMem) drop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.regions {
		kvDrop(r)
	}
}

// resident is how many bytes of the mapped pool are in memory; ok is false
// when the pool is Go memory (no mapping, or not Linux), whose residency
// the process cannot tell apart from the rest of the heap.
func (m *kvMem) resident() (bytes int64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.regions) == 0 {
		return 0, false
	}
	for _, r := range m.regions {
		n, ok := kvResident(r)
		if !ok {
			return 0, false
		}
		bytes += n
	}
	return bytes, true
}

// unmap releases the mappings; it runs as the Backend's cleanup, once
// nothing can reach the slices.
func (m *kvMem) unmap() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.regions {
		kvUnmap(r)
	}
	m.regions = nil
}

// attachKVMem ties m's mappings to b's lifetime: they are unmapped once b
// is unreachable (after Close, or for a Backend never closed).
func attachKVMem(b *Backend, m *kvMem) {
	runtime.AddCleanup(b, func(m *kvMem) { m.unmap() }, m)
}
