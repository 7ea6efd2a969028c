package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"unicode/utf8"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// ErrFormat is wrapped by every error about malformed file contents.
var ErrFormat = errors.New("gguf: malformed file")

// Limits that keep hostile files from making the reader work or allocate
// without bound. Real models stay far below them.
const (
	maxStringLen   = 1 << 24 // 16 MiB for one string (chat templates are KiB)
	maxDims        = 4       // ggml tensors have at most 4 dimensions
	maxArrayNest   = 2       // arrays of arrays are allowed one level deep
	maxNameLen     = 1 << 16 // tensor names
	maxTensorCount = 1 << 20
)

// Value types of GGUF metadata.
const (
	vtUint8   = 0
	vtInt8    = 1
	vtUint16  = 2
	vtInt16   = 3
	vtUint32  = 4
	vtInt32   = 5
	vtFloat32 = 6
	vtBool    = 7
	vtString  = 8
	vtArray   = 9
	vtUint64  = 10
	vtInt64   = 11
	vtFloat64 = 12
)

// KV is one metadata entry. Value holds scalars as Go types (uint8 ...
// int64, float32, float64, bool, string) and arrays as typed slices
// ([]uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool,
// []string, []uint64, []int64, []float64); arrays of arrays as []any.
type KV struct {
	Key   string
	Value any
}

// TensorInfo describes one tensor.
type TensorInfo struct {
	Name string
	// Dims are the ggml dimensions, ne0 (the contiguous one) first.
	Dims []uint64
	Type Type
	// Offset is the tensor's offset within the data section.
	Offset uint64
	// Data is exactly the tensor's bytes (a view into the file).
	Data []byte
}

// NumElements is the product of the dimensions.
func (t *TensorInfo) NumElements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is a parsed GGUF file.
type File struct {
	Version   uint32
	Alignment uint64
	KVs       []KV
	Tensors   []TensorInfo
	// DataOffset is where the tensor data section starts in the file.
	DataOffset uint64

	kv      map[string]int
	tensors map[string]int
	unmap   func() error
	data    []byte // the whole file: Open's mapping, or Parse's bytes
	placed  *Placement
}

// Placement says where a file's bytes are after [File.ToMemory].
type Placement struct {
	// Bytes is the file's size.
	Bytes int64
	// Anonymous is true when the bytes were copied from the file's mapping
	// into private anonymous memory.
	Anonymous bool
	// HugePages is how many of them the kernel backs with transparent huge
	// pages (0 where it grants none, or where that cannot be read).
	HugePages int64
}

// Placed is ToMemory's placement once it has moved the file's bytes (ok
// false before).
func (f *File) Placed() (p Placement, ok bool) {
	if f.placed == nil {
		return Placement{}, false
	}
	return *f.placed, true
}

// ToMemory moves an opened file's bytes from its read-only file mapping
// into private, read-only anonymous memory at the same addresses, asking
// the kernel for transparent huge pages (Linux; elsewhere it returns
// errors.ErrUnsupported and the file stays mapped). Every view into the
// file ([TensorInfo.Data], and whatever was built on them) stays valid
// and holds the same bytes; nothing may read the file's data while it
// runs. The bytes then no longer come from the page cache: the kernel
// cannot evict them, and on the CPU the weights stream from huge pages,
// which costs fewer TLB misses (BENCHMARKS.md §1, what bounds the CPU
// runtime). A second call, or one on a Parse'd file (already in Go
// memory), returns where the bytes are and copies nothing.
func (f *File) ToMemory() (Placement, error) {
	if f.placed != nil {
		return *f.placed, nil
	}
	if f.unmap == nil {
		return Placement{Bytes: int64(len(f.data))}, nil
	}
	p, err := toMemory(f.data)
	if err != nil {
		return Placement{}, err
	}
	f.placed = &p
	return p, nil
}

// Open memory-maps and parses the file at path.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() < 24 {
		return nil, fmt.Errorf("%w: %s: %d bytes is too short for a GGUF header", ErrFormat, path, st.Size())
	}
	data, unmap, err := mapFile(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("gguf: map %s: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		_ = unmap()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.unmap = unmap
	return f, nil
}

// Close releases the file's mapping. Tensor data must not be used after.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	u := f.unmap
	f.unmap = nil
	return u()
}

// decoder reads little-endian values with bounds checks.
type decoder struct {
	b   []byte
	off uint64
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format+" (at byte %d)", append([]any{ErrFormat}, append(args, d.off)...)...)
	}
}

func (d *decoder) need(n uint64) bool {
	if d.err != nil {
		return false
	}
	if n > uint64(len(d.b))-d.off {
		d.fail("need %d bytes, only %d left", n, uint64(len(d.b))-d.off)
		return false
	}
	return true
}

func (d *decoder) u8() uint8 {
	if !d.need(1) {
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *decoder) u16() uint16 {
	if !d.need(2) {
		return 0
	}
	v := binary.LittleEndian.Uint16(d.b[d.off:])
	d.off += 2
	return v
}

func (d *decoder) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v
}

func (d *decoder) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

func (d *decoder) str(limit uint64) string {
	n := d.u64()
	if d.err != nil {
		return ""
	}
	if n > limit {
		d.fail("string of %d bytes exceeds the limit of %d", n, limit)
		return ""
	}
	if !d.need(n) {
		return ""
	}
	s := string(d.b[d.off : d.off+n])
	d.off += n
	return s
}

// elemSize is the encoded size of a fixed-size value type, 0 for others.
func elemSize(vt uint32) uint64 {
	switch vt {
	case vtUint8, vtInt8, vtBool:
		return 1
	case vtUint16, vtInt16:
		return 2
	case vtUint32, vtInt32, vtFloat32:
		return 4
	case vtUint64, vtInt64, vtFloat64:
		return 8
	}
	return 0
}

func (d *decoder) scalar(vt uint32) any {
	switch vt {
	case vtUint8:
		return d.u8()
	case vtInt8:
		return int8(d.u8())
	case vtUint16:
		return d.u16()
	case vtInt16:
		return int16(d.u16())
	case vtUint32:
		return d.u32()
	case vtInt32:
		return int32(d.u32())
	case vtFloat32:
		return math.Float32frombits(d.u32())
	case vtBool:
		b := d.u8()
		if b > 1 {
			d.fail("bool value %d", b)
		}
		return b == 1
	case vtString:
		return d.str(maxStringLen)
	case vtUint64:
		return d.u64()
	case vtInt64:
		return int64(d.u64())
	case vtFloat64:
		return math.Float64frombits(d.u64())
	}
	d.fail("unknown value type %d", vt)
	return nil
}

func (d *decoder) value(vt uint32, depth int) any {
	if vt != vtArray {
		return d.scalar(vt)
	}
	if depth >= maxArrayNest {
		d.fail("arrays nested deeper than %d", maxArrayNest)
		return nil
	}
	et := d.u32()
	n := d.u64()
	if d.err != nil {
		return nil
	}
	// Every element takes at least one byte (strings take 8): a count larger
	// than the bytes left is a lie, refuse it before allocating.
	min := elemSize(et)
	switch et {
	case vtString, vtArray:
		min = 8
	}
	if min == 0 {
		d.fail("unknown array element type %d", et)
		return nil
	}
	if n > (uint64(len(d.b))-d.off)/min {
		d.fail("array of %d elements does not fit in the %d bytes left", n, uint64(len(d.b))-d.off)
		return nil
	}
	switch et {
	case vtUint8:
		out := make([]uint8, n)
		copy(out, d.b[d.off:d.off+n])
		d.off += n
		return out
	case vtInt8:
		out := make([]int8, n)
		for i := range out {
			out[i] = int8(d.b[d.off+uint64(i)])
		}
		d.off += n
		return out
	case vtUint16:
		out := make([]uint16, n)
		for i := range out {
			out[i] = d.u16()
		}
		return out
	case vtInt16:
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(d.u16())
		}
		return out
	case vtUint32:
		out := make([]uint32, n)
		for i := range out {
			out[i] = d.u32()
		}
		return out
	case vtInt32:
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(d.u32())
		}
		return out
	case vtFloat32:
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(d.u32())
		}
		return out
	case vtBool:
		out := make([]bool, n)
		for i := range out {
			b := d.u8()
			if b > 1 {
				d.fail("bool value %d", b)
				return nil
			}
			out[i] = b == 1
		}
		return out
	case vtUint64:
		out := make([]uint64, n)
		for i := range out {
			out[i] = d.u64()
		}
		return out
	case vtInt64:
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(d.u64())
		}
		return out
	case vtFloat64:
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(d.u64())
		}
		return out
	case vtString:
		out := make([]string, n)
		for i := range out {
			out[i] = d.str(maxStringLen)
			if d.err != nil {
				return nil
			}
		}
		return out
	case vtArray:
		out := make([]any, n)
		for i := range out {
			out[i] = d.value(vtArray, depth+1)
			if d.err != nil {
				return nil
			}
		}
		return out
	}
	return nil
}

// Parse parses a whole GGUF file held in data. Tensor data slices alias data.
func Parse(data []byte) (*File, error) {
	d := &decoder{b: data}
	if len(data) < 4 || string(data[:4]) != Magic {
		return nil, fmt.Errorf("%w: not a GGUF file (bad magic)", ErrFormat)
	}
	d.off = 4
	f := &File{Version: d.u32()}
	if d.err == nil && (f.Version < 2 || f.Version > 3) {
		if f.Version>>24 != 0 {
			return nil, fmt.Errorf("%w: version %#x looks big-endian; only little-endian files are supported", ErrFormat, f.Version)
		}
		return nil, fmt.Errorf("%w: unsupported version %d (want 2 or 3)", ErrFormat, f.Version)
	}
	nTensors := d.u64()
	nKV := d.u64()
	if d.err != nil {
		return nil, d.err
	}
	// A KV takes at least 8 (key length) + 4 (type) + 1 bytes, a tensor info
	// at least 8 + 4 + 8 + 4 + 8.
	left := uint64(len(data)) - d.off
	if nKV > left/13 {
		return nil, fmt.Errorf("%w: %d metadata entries cannot fit in %d bytes", ErrFormat, nKV, left)
	}
	if nTensors > maxTensorCount || nTensors > left/32 {
		return nil, fmt.Errorf("%w: %d tensors cannot fit in %d bytes", ErrFormat, nTensors, left)
	}
	f.KVs = make([]KV, 0, nKV)
	f.kv = make(map[string]int, nKV)
	for i := uint64(0); i < nKV; i++ {
		key := d.str(maxNameLen)
		vt := d.u32()
		v := d.value(vt, 0)
		if d.err != nil {
			return nil, fmt.Errorf("metadata entry %d (%q): %w", i, key, d.err)
		}
		if !utf8.ValidString(key) || key == "" {
			return nil, fmt.Errorf("%w: metadata key %q is empty or not UTF-8", ErrFormat, key)
		}
		if _, dup := f.kv[key]; dup {
			return nil, fmt.Errorf("%w: duplicate metadata key %q", ErrFormat, key)
		}
		f.kv[key] = len(f.KVs)
		f.KVs = append(f.KVs, KV{Key: key, Value: v})
	}
	f.Alignment = DefaultAlignment
	if v, ok := f.Get("general.alignment"); ok {
		a, isU32 := v.(uint32)
		if !isU32 || a == 0 || a&(a-1) != 0 || a > 1<<20 {
			return nil, fmt.Errorf("%w: general.alignment %v must be a uint32 power of two", ErrFormat, v)
		}
		f.Alignment = uint64(a)
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	f.tensors = make(map[string]int, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		var t TensorInfo
		t.Name = d.str(maxNameLen)
		nd := d.u32()
		if d.err == nil && (nd == 0 || nd > maxDims) {
			d.fail("tensor %q has %d dimensions", t.Name, nd)
		}
		if d.err != nil {
			return nil, fmt.Errorf("tensor info %d: %w", i, d.err)
		}
		t.Dims = make([]uint64, nd)
		for j := range t.Dims {
			t.Dims[j] = d.u64()
		}
		t.Type = Type(d.u32())
		t.Offset = d.u64()
		if d.err != nil {
			return nil, fmt.Errorf("tensor info %d (%q): %w", i, t.Name, d.err)
		}
		if _, dup := f.tensors[t.Name]; dup {
			return nil, fmt.Errorf("%w: duplicate tensor %q", ErrFormat, t.Name)
		}
		f.tensors[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	// The data section starts at the next multiple of the alignment.
	start := (d.off + f.Alignment - 1) / f.Alignment * f.Alignment
	if start > uint64(len(data)) {
		if len(f.Tensors) > 0 {
			return nil, fmt.Errorf("%w: file ends before its data section", ErrFormat)
		}
		start = uint64(len(data))
	}
	f.DataOffset = start
	size := uint64(len(data)) - start
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if !t.Type.Known() {
			return nil, fmt.Errorf("%w: tensor %q has unknown type %d", ErrFormat, t.Name, uint32(t.Type))
		}
		n := uint64(1)
		for _, dim := range t.Dims {
			if dim == 0 || dim > 1<<40 || n > (1<<44)/dim {
				return nil, fmt.Errorf("%w: tensor %q has impossible dimensions %v", ErrFormat, t.Name, t.Dims)
			}
			n *= dim
		}
		bl := uint64(t.Type.BlockLen())
		if t.Dims[0]%bl != 0 {
			return nil, fmt.Errorf("%w: tensor %q: row of %d elements is not a whole number of %v blocks", ErrFormat, t.Name, t.Dims[0], t.Type)
		}
		nbytes := n / bl * uint64(t.Type.BlockSize())
		if t.Offset%f.Alignment != 0 {
			return nil, fmt.Errorf("%w: tensor %q offset %d is not aligned to %d", ErrFormat, t.Name, t.Offset, f.Alignment)
		}
		if t.Offset > size || nbytes > size-t.Offset {
			return nil, fmt.Errorf("%w: tensor %q (%d bytes at offset %d) runs past the end of the data section (%d bytes); the file may be truncated", ErrFormat, t.Name, nbytes, t.Offset, size)
		}
		t.Data = data[start+t.Offset : start+t.Offset+nbytes : start+t.Offset+nbytes]
	}
	f.data = data
	return f, nil
}
