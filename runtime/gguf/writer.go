package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Writer builds a GGUF version 3 file. Metadata and tensors are written in
// the order they were added.
type Writer struct {
	kvs     []KV
	tensors []TensorInfo
	err     error
}

// NewWriter returns an empty writer.
func NewWriter() *Writer { return &Writer{} }

// AddKV adds a metadata entry. value must be one of the Go types described
// at [KV]; anything else makes WriteTo fail.
func (w *Writer) AddKV(key string, value any) {
	w.kvs = append(w.kvs, KV{Key: key, Value: value})
}

// AddTensor adds a tensor. dims are ggml dimensions (ne0 first); data must
// be exactly the bytes the type and dims need.
func (w *Writer) AddTensor(name string, typ Type, dims []uint64, data []byte) error {
	if !typ.Known() {
		return fmt.Errorf("gguf: tensor %q: unknown type %d", name, uint32(typ))
	}
	if len(dims) == 0 || len(dims) > maxDims {
		return fmt.Errorf("gguf: tensor %q: %d dimensions", name, len(dims))
	}
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	if dims[0]%uint64(typ.BlockLen()) != 0 {
		return fmt.Errorf("gguf: tensor %q: ne0 %d is not a multiple of the %v block length", name, dims[0], typ)
	}
	want := n / uint64(typ.BlockLen()) * uint64(typ.BlockSize())
	if uint64(len(data)) != want {
		return fmt.Errorf("gguf: tensor %q: %d bytes of data, want %d", name, len(data), want)
	}
	w.tensors = append(w.tensors, TensorInfo{Name: name, Dims: append([]uint64(nil), dims...), Type: typ, Data: data})
	return nil
}

type countWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

func (c *countWriter) u32(v uint32) { c.write(binary.LittleEndian.AppendUint32(nil, v)) }
func (c *countWriter) u64(v uint64) { c.write(binary.LittleEndian.AppendUint64(nil, v)) }
func (c *countWriter) str(s string) { c.u64(uint64(len(s))); c.write([]byte(s)) }

// WriteTo writes the file.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	align := uint64(DefaultAlignment)
	for _, kv := range w.kvs {
		if kv.Key == "general.alignment" {
			a, ok := kv.Value.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return 0, fmt.Errorf("gguf: general.alignment must be a uint32 power of two")
			}
			align = uint64(a)
		}
	}
	c := &countWriter{w: bufio.NewWriterSize(out, 1<<20)}
	c.write([]byte(Magic))
	c.u32(3)
	c.u64(uint64(len(w.tensors)))
	c.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		c.str(kv.Key)
		if err := writeValue(c, kv.Value, true); err != nil {
			return c.n, fmt.Errorf("gguf: key %q: %w", kv.Key, err)
		}
	}
	off := uint64(0)
	offsets := make([]uint64, len(w.tensors))
	for i, t := range w.tensors {
		c.str(t.Name)
		c.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			c.u64(d)
		}
		c.u32(uint32(t.Type))
		offsets[i] = off
		c.u64(off)
		off += (uint64(len(t.Data)) + align - 1) / align * align
	}
	pad := func() {
		if r := uint64(c.n) % align; r != 0 {
			c.write(make([]byte, align-r))
		}
	}
	pad()
	for _, t := range w.tensors {
		c.write(t.Data)
		pad()
	}
	if c.err == nil {
		c.err = c.w.Flush()
	}
	return c.n, c.err
}

func writeValue(c *countWriter, v any, typed bool) error {
	tag := func(t uint32) {
		if typed {
			c.u32(t)
		}
	}
	arr := func(et uint32, n int) {
		tag(vtArray)
		c.u32(et)
		c.u64(uint64(n))
	}
	le := binary.LittleEndian
	switch x := v.(type) {
	case uint8:
		tag(vtUint8)
		c.write([]byte{x})
	case int8:
		tag(vtInt8)
		c.write([]byte{byte(x)})
	case uint16:
		tag(vtUint16)
		c.write(le.AppendUint16(nil, x))
	case int16:
		tag(vtInt16)
		c.write(le.AppendUint16(nil, uint16(x)))
	case uint32:
		tag(vtUint32)
		c.u32(x)
	case int32:
		tag(vtInt32)
		c.u32(uint32(x))
	case float32:
		tag(vtFloat32)
		c.u32(math.Float32bits(x))
	case bool:
		tag(vtBool)
		b := byte(0)
		if x {
			b = 1
		}
		c.write([]byte{b})
	case string:
		tag(vtString)
		c.str(x)
	case uint64:
		tag(vtUint64)
		c.u64(x)
	case int64:
		tag(vtInt64)
		c.u64(uint64(x))
	case float64:
		tag(vtFloat64)
		c.u64(math.Float64bits(x))
	case []uint8:
		arr(vtUint8, len(x))
		c.write(x)
	case []int8:
		arr(vtInt8, len(x))
		for _, e := range x {
			c.write([]byte{byte(e)})
		}
	case []uint16:
		arr(vtUint16, len(x))
		for _, e := range x {
			c.write(le.AppendUint16(nil, e))
		}
	case []int16:
		arr(vtInt16, len(x))
		for _, e := range x {
			c.write(le.AppendUint16(nil, uint16(e)))
		}
	case []uint32:
		arr(vtUint32, len(x))
		for _, e := range x {
			c.u32(e)
		}
	case []int32:
		arr(vtInt32, len(x))
		for _, e := range x {
			c.u32(uint32(e))
		}
	case []float32:
		arr(vtFloat32, len(x))
		for _, e := range x {
			c.u32(math.Float32bits(e))
		}
	case []bool:
		arr(vtBool, len(x))
		for _, e := range x {
			b := byte(0)
			if e {
				b = 1
			}
			c.write([]byte{b})
		}
	case []string:
		arr(vtString, len(x))
		for _, e := range x {
			c.str(e)
		}
	case []uint64:
		arr(vtUint64, len(x))
		for _, e := range x {
			c.u64(e)
		}
	case []int64:
		arr(vtInt64, len(x))
		for _, e := range x {
			c.u64(uint64(e))
		}
	case []float64:
		arr(vtFloat64, len(x))
		for _, e := range x {
			c.u64(math.Float64bits(e))
		}
	default:
		return fmt.Errorf("unsupported value type %T", v)
	}
	return nil
}
