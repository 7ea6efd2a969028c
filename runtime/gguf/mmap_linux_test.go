//go:build linux

package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// writeTestFile writes a GGUF with one F32 tensor of n floats (value i at
// index i) and returns its path.
func writeTestFile(t *testing.T, n int) string {
	t.Helper()
	w := NewWriter()
	w.AddKV("general.architecture", "llama")
	data := make([]byte, 4*n)
	for i := range n {
		data[4*i], data[4*i+1], data[4*i+2] = byte(i), byte(i>>8), byte(i>>16)
	}
	if err := w.AddTensor("t", TypeF32, []uint64{uint64(n)}, data); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "t.gguf")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(fh); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// mapsLine is /proc/self/maps' line for the mapping that holds addr.
func mapsLine(t *testing.T, addr uintptr) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		lo, hi, ok := strings.Cut(strings.Fields(line + " x")[0], "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(lo, 16, 64)
		z, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && uint64(addr) >= a && uint64(addr) < z {
			return line
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return ""
}

// ToMemory keeps every view's address and bytes, and the file's mapping
// becomes private anonymous read-only memory.
func TestToMemory(t *testing.T) {
	const n = 3<<20 + 5 // 12 MiB and a bit: whole huge pages and a ragged end
	path := writeTestFile(t, n)
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := uintptr(unsafe.Pointer(unsafe.SliceData(f.data)))
	if at%hugePage != 0 {
		t.Errorf("the file is mapped at %#x, not aligned to %d", at, hugePage)
	}
	tn, _ := f.Tensor("t")
	view := tn.Data
	if line := mapsLine(t, at); !strings.HasSuffix(line, "t.gguf") {
		t.Fatalf("before ToMemory the mapping is %q, want the file's", line)
	}
	if _, ok := f.Placed(); ok {
		t.Error("Placed before ToMemory")
	}
	p, err := f.ToMemory()
	if err != nil {
		t.Fatal(err)
	}
	if q, ok := f.Placed(); !ok || q != p {
		t.Errorf("Placed after ToMemory: %+v, %v", q, ok)
	}
	if !p.Anonymous || p.Bytes != int64(len(want)) || p.HugePages < 0 || p.HugePages > p.Bytes+hugePage {
		t.Errorf("placement %+v for a %d-byte file", p, len(want))
	}
	t.Logf("placement %+v", p)
	if got := uintptr(unsafe.Pointer(unsafe.SliceData(f.data))); got != at {
		t.Errorf("data moved from %#x to %#x", at, got)
	}
	if !bytes.Equal(f.data, want) {
		t.Error("the bytes differ from the file's after ToMemory")
	}
	tn2, _ := f.Tensor("t")
	if !bytes.Equal(view, tn2.Data) || !bytes.Equal(view, want[f.DataOffset+tn.Offset:][:len(view)]) {
		t.Error("a tensor view read before ToMemory holds other bytes after it")
	}
	line := mapsLine(t, at)
	if fields := strings.Fields(line); len(fields) != 5 || fields[1] != "r--p" {
		t.Errorf("after ToMemory the mapping is %q, want private anonymous read-only memory", line)
	}
	if line := mapsLine(t, at+uintptr(len(want))-1); strings.HasSuffix(line, "t.gguf") {
		t.Errorf("the file's last page is still mapped: %q", line)
	}
	if p2, err := f.ToMemory(); err != nil || p2 != p {
		t.Errorf("second ToMemory: %+v, %v; want %+v", p2, err, p)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// A parsed buffer is in Go memory already: ToMemory copies nothing.
func TestToMemoryParsed(t *testing.T) {
	b, err := os.ReadFile(writeTestFile(t, 100))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.ToMemory()
	if err != nil || p.Anonymous || p.Bytes != int64(len(b)) {
		t.Errorf("ToMemory on a parsed buffer: %+v, %v", p, err)
	}
}

func TestSmapsAnonHuge(t *testing.T) {
	const smaps = `7f0000000000-7f0000400000 r--p 00000000 00:00 0 
Size:               4096 kB
AnonHugePages:         0 kB
VmFlags: rd mr mw me ac 
7f0000400000-7f0000c00000 r--p 00000000 00:00 0 
Size:               8192 kB
Rss:                8192 kB
AnonHugePages:      6144 kB
VmFlags: rd mr mw me ac hg 
`
	for _, c := range []struct {
		addr uintptr
		want int64
		ok   bool
	}{{0x7f0000400000, 6144 << 10, true}, {0x7f0000000000, 0, true}, {0x7f0000200000, 0, false}} {
		got, err := smapsAnonHuge(strings.NewReader(smaps), c.addr)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("smapsAnonHuge(%#x) = %d, %v; want %d, ok %v", c.addr, got, err, c.want, c.ok)
		}
	}
}
