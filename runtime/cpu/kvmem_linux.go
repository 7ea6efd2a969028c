//go:build linux

package cpu

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the x86-64 and arm64 transparent huge page size: mappings
// are aligned to it so that the kernel can back them with huge pages.
const hugePage = 2 << 20

// kvMap maps at least bytes of anonymous memory (whole pages) aligned to
// hugePage, asks for huge pages, and populates it (MADV_POPULATE_WRITE,
// Linux 5.14+; on older kernels one write per page). The slack mapped for
// the alignment is unmapped again, so that no huge page can be placed past
// the end (it would be resident but unused). ok is false when mmap fails:
// the caller then uses Go memory.
func kvMap(bytes int) (mapping []byte, ok bool) {
	page := uintptr(unix.Getpagesize())
	size := (uintptr(bytes) + page - 1) &^ (page - 1)
	p, err := unix.MmapPtr(-1, 0, nil, size+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, false
	}
	base := uintptr(p)
	start := (base + hugePage - 1) &^ (hugePage - 1)
	if start > base {
		_ = unix.MunmapPtr(p, start-base)
	}
	_ = unix.MunmapPtr(unsafe.Add(p, start+size-base), base+hugePage-start) // the tail: never empty
	mapping = unsafe.Slice((*byte)(unsafe.Add(p, start-base)), size)
	_ = unix.Madvise(mapping, unix.MADV_HUGEPAGE) // a hint: refused where THP is off
	if unix.Madvise(mapping, unix.MADV_POPULATE_WRITE) != nil {
		for i := 0; i < len(mapping); i += int(page) {
			mapping[i] = 0
		}
	}
	return mapping, true
}

// kvDrop frees r's pages; r stays mapped and reads as zeros.
func kvDrop(r []byte) { _ = unix.Madvise(r, unix.MADV_DONTNEED) }

func kvUnmap(r []byte) { _ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(r)), uintptr(len(r))) }

// kvResident counts r's bytes in memory (mincore, a page at a time).
func kvResident(r []byte) (int64, bool) {
	if len(r) == 0 {
		return 0, true
	}
	page := unix.Getpagesize()
	vec := make([]byte, (len(r)+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(r))), uintptr(len(r)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, false
	}
	var n int64
	for _, v := range vec {
		n += int64(v & 1)
	}
	return n * int64(page), true
}
