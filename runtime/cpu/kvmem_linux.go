//go:build linux

package cpu

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the x86-64 and arm64 transparent huge page size: mappings
// are aligned to it so that the kernel can back them with huge pages.
const hugePage = 2 << 20

// kvMap maps bytes of anonymous memory aligned to hugePage, asks for huge
// pages, and populates it (MADV_POPULATE_WRITE, Linux 5.14+; on older
// kernels one write per page). The slack mapped for the alignment is
// unmapped again, so that no huge page can be placed past the end (it
// would be resident but unused). mapped is false when mmap fails: the
// caller then uses Go memory.
func kvMap(bytes int) (kvMapping, bool) {
	size := uintptr(bytes+4095) &^ 4095
	p, err := unix.MmapPtr(-1, 0, nil, size+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return kvMapping{}, false
	}
	base := uintptr(p)
	start := (base + hugePage - 1) &^ (hugePage - 1)
	if start > base {
		_ = unix.MunmapPtr(p, start-base)
	}
	if tail := base + size + hugePage - (start + size); tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(p, start+size-base), tail)
	}
	whole := unsafe.Slice((*byte)(unsafe.Add(p, start-base)), size)
	use := whole[:bytes]
	_ = unix.Madvise(use, unix.MADV_HUGEPAGE) // a hint: refused where THP is off
	if unix.Madvise(use, unix.MADV_POPULATE_WRITE) != nil {
		for i := 0; i < len(use); i += 4096 {
			use[i] = 0
		}
	}
	return kvMapping{whole: whole, use: use}, true
}

// kvDrop frees r's pages; r stays mapped and reads as zeros.
func kvDrop(r []byte) { _ = unix.Madvise(r, unix.MADV_DONTNEED) }

func kvUnmap(r []byte) { _ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(r)), uintptr(len(r))) }
