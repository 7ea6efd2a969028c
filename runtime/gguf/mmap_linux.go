//go:build linux

package gguf

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the x86-64 and arm64 transparent huge page size. The file is
// mapped at an address aligned to it, so that the anonymous memory that
// may replace the mapping (toMemory) can be backed by huge pages from its
// first byte.
const hugePage = 2 << 20

// mapFile maps the file read-only at a hugePage-aligned address.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if int64(int(size)) != size {
		return nil, nil, syscall.EFBIG
	}
	n := uintptr(size)
	// Reserve the size plus a huge page of address space, then map the
	// file over the reservation's first aligned address and give back the
	// slack on both sides.
	res, err := unix.MmapPtr(-1, 0, nil, n+hugePage, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, nil, err
	}
	base := uintptr(res)
	start := (base + hugePage - 1) &^ (hugePage - 1)
	p, err := unix.MmapPtr(int(f.Fd()), 0, unsafe.Add(res, start-base), n, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_FIXED)
	if err != nil {
		_ = unix.MunmapPtr(res, n+hugePage)
		return nil, nil, err
	}
	if start > base {
		_ = unix.MunmapPtr(res, start-base)
	}
	page := uintptr(unix.Getpagesize())
	if end := (start + n + page - 1) &^ (page - 1); end < base+n+hugePage {
		_ = unix.MunmapPtr(unsafe.Add(res, end-base), base+n+hugePage-end)
	}
	data := unsafe.Slice((*byte)(p), int(n))
	return data, func() error { return unix.MunmapPtr(p, n) }, nil
}

// toMemory copies the mapped file's bytes into private anonymous memory
// (transparent huge pages asked for with MADV_HUGEPAGE), makes it
// read-only, and moves it over the file's mapping with mremap, so that
// every view into data keeps its address and its bytes.
func toMemory(data []byte) (Placement, error) {
	if len(data) == 0 {
		return Placement{}, nil
	}
	at := unsafe.Pointer(unsafe.SliceData(data))
	n := uintptr(len(data))
	page := uintptr(unix.Getpagesize())
	size := (n + page - 1) &^ (page - 1)
	// The copy must lie hugePage-aligned too: mremap moves huge pages whole
	// only between aligned addresses.
	res, err := unix.MmapPtr(-1, 0, nil, size+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return Placement{}, fmt.Errorf("gguf: map %d bytes of memory for the weights: %w", size, err)
	}
	base := uintptr(res)
	start := (base + hugePage - 1) &^ (hugePage - 1)
	if start > base {
		_ = unix.MunmapPtr(res, start-base)
	}
	_ = unix.MunmapPtr(unsafe.Add(res, start+size-base), base+hugePage-start) // the tail: never empty
	cpAt := unsafe.Add(res, start-base)
	cp := unsafe.Slice((*byte)(cpAt), int(size))
	_ = unix.Madvise(cp, unix.MADV_HUGEPAGE) // a hint: refused where THP is off
	copy(cp, data)
	if err := unix.Mprotect(cp, unix.PROT_READ); err != nil {
		_ = unix.MunmapPtr(cpAt, size)
		return Placement{}, fmt.Errorf("gguf: protect the weights' memory: %w", err)
	}
	if _, _, e := unix.Syscall6(unix.SYS_MREMAP, uintptr(cpAt), size, size, unix.MREMAP_MAYMOVE|unix.MREMAP_FIXED, uintptr(at), 0); e != 0 {
		_ = unix.MunmapPtr(cpAt, size)
		return Placement{}, fmt.Errorf("gguf: move the weights' memory over the file's mapping: %w", e)
	}
	pl := Placement{Bytes: int64(n), Anonymous: true}
	pl.HugePages, _ = anonHugeBytes(uintptr(at))
	return pl, nil
}

// anonHugeBytes is the AnonHugePages of the mapping that starts at addr
// (/proc/self/smaps).
func anonHugeBytes(addr uintptr) (int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return smapsAnonHuge(f, addr)
}

// smapsAnonHuge reads smaps-format text: the AnonHugePages of the mapping
// whose range starts at addr.
func smapsAnonHuge(r io.Reader, addr uintptr) (int64, error) {
	sc := bufio.NewScanner(r)
	want := []byte(strconv.FormatUint(uint64(addr), 16) + "-")
	in := false
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) > 0 && (line[0] >= '0' && line[0] <= '9' || line[0] >= 'a' && line[0] <= 'f') { // a mapping's range; its fields' names are capitalised
			in = bytes.HasPrefix(line, want)
			continue
		}
		if in && bytes.HasPrefix(line, []byte("AnonHugePages:")) {
			f := bytes.Fields(line)
			if len(f) < 2 {
				break
			}
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("gguf: no mapping at %#x in smaps", addr)
}
