//go:build linux

package cpu

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident counts the pages of r that are in memory (kvResident).
func resident(t *testing.T, r []byte) (in, all int) {
	t.Helper()
	n, ok := kvResident(r)
	if !ok {
		t.Fatal("mincore failed")
	}
	page := unix.Getpagesize()
	return int(n) / page, (len(r) + page - 1) / page
}

// TestKVMemPopulated: the KV pool's memory is resident as soon as it is
// allocated (no request pays its first-touch faults), aligned for huge
// pages, zero, and given back by Close (drop) while it still reads as
// zeros; the cleanup unmaps it.
func TestKVMemPopulated(t *testing.T) {
	m := &kvMem{}
	const n = 3<<20 + 5 // not a whole number of pages
	kv := kvAlloc[uint16](m, n)
	if len(kv) != n {
		t.Fatalf("len %d, want %d", len(kv), n)
	}
	if len(m.regions) != 1 {
		t.Fatalf("%d mapped regions, want 1 (mmap failed?)", len(m.regions))
	}
	if p := uintptr(unsafe.Pointer(&kv[0])); p%hugePage != 0 {
		t.Errorf("pool at %#x, not aligned to %d", p, hugePage)
	}
	use := unsafe.Slice((*byte)(unsafe.Pointer(&kv[0])), 2*n)
	if in, all := resident(t, use); in != all {
		t.Errorf("%d of %d pages resident after allocation, want all", in, all)
	}
	for i := 0; i < n; i += 997 {
		if kv[i] != 0 {
			t.Fatalf("kv[%d] = %d, want 0", i, kv[i])
		}
	}
	if got, ok := m.resident(); !ok || got != int64(len(m.regions[0])) {
		t.Errorf("kvMem.resident %d %v, want the whole mapping, %d", got, ok, len(m.regions[0]))
	}
	kv[12345] = 7
	m.drop()
	if in, _ := resident(t, use); in != 0 {
		t.Errorf("%d pages resident after drop, want 0", in)
	}
	if kv[12345] != 0 {
		t.Errorf("after drop kv[12345] = %d, want 0", kv[12345])
	}
	m.unmap()
	if m.regions != nil {
		t.Error("unmap kept its regions")
	}
	vec := make([]byte, 1)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&use[0])), 4096, uintptr(unsafe.Pointer(&vec[0]))); e != unix.ENOMEM {
		t.Errorf("mincore after unmap: %v, want ENOMEM (still mapped)", e)
	}
}
