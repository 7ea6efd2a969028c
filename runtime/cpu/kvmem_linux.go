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
// kernels one write per page). mapped is false when mmap fails: the caller
// then uses Go memory.
func kvMap(bytes int) (kvMapping, bool) {
	whole, err := unix.Mmap(-1, 0, bytes+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return kvMapping{}, false
	}
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(whole))) % hugePage); r != 0 {
		off = hugePage - r
	}
	use := whole[off : off+bytes]
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

func kvUnmap(r []byte) { _ = unix.Munmap(r) }
