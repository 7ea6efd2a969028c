package quant

import (
	"fmt"

	"github.com/weft-inference/weft/runtime/gguf"
)

// Weight is a 2-D weight matrix in its stored (possibly quantized) form:
// Rows rows of Cols elements each, row-major, each row RowBytes long.
// For a GGUF tensor with dims [ne0, ne1], Cols = ne0 and Rows = ne1.
type Weight struct {
	Type gguf.Type
	Rows int
	Cols int
	Data []byte // Rows * RowBytes bytes, often a view into a memory-mapped file
}

// RowBytes is the number of bytes one row takes (0 when Cols is not a whole
// number of blocks or the type is unknown; Validate reports why).
func (w Weight) RowBytes() int {
	n, err := w.Type.RowBytes(w.Cols)
	if err != nil {
		return 0
	}
	return n
}

// Validate checks that the type is supported and that Data holds exactly
// Rows rows of Cols elements. Loaders call it once; MatMul and Row panic on
// a weight that fails it.
func (w Weight) Validate() error {
	_, err := w.validate()
	return err
}

// validate is Validate, also returning the row size.
func (w Weight) validate() (int, error) {
	if !Supported(w.Type) {
		return 0, fmt.Errorf("%w: %v", ErrType, w.Type)
	}
	if w.Rows < 0 || w.Cols <= 0 {
		return 0, fmt.Errorf("%w: %d x %d weight", ErrSize, w.Rows, w.Cols)
	}
	rb, err := w.Type.RowBytes(w.Cols)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrSize, err)
	}
	if len(w.Data) != w.Rows*rb {
		return 0, fmt.Errorf("%w: %d x %d %v weight needs %d bytes, has %d", ErrSize, w.Rows, w.Cols, w.Type, w.Rows*rb, len(w.Data))
	}
	return rb, nil
}

// FromTensor wraps a 2-D (or 1-D, as one row) GGUF tensor as a Weight.
func FromTensor(t *gguf.TensorInfo) (Weight, error) {
	if len(t.Dims) == 0 || len(t.Dims) > 2 {
		return Weight{}, fmt.Errorf("%w: tensor %s has %d dims", ErrSize, t.Name, len(t.Dims))
	}
	rows := 1
	if len(t.Dims) == 2 {
		rows = int(t.Dims[1])
	}
	w := Weight{Type: t.Type, Rows: rows, Cols: int(t.Dims[0]), Data: t.Data}
	if err := w.Validate(); err != nil {
		return Weight{}, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	return w, nil
}

// Row dequantizes row r into dst[:Cols] (the embedding lookup).
func (w Weight) Row(r int, dst []float32) {
	rb := w.RowBytes()
	if r < 0 || r >= w.Rows || rb == 0 || len(dst) < w.Cols || len(w.Data) < w.Rows*rb {
		panic(fmt.Sprintf("quant: Row(%d) of %d x %d %v weight into %d floats", r, w.Rows, w.Cols, w.Type, len(dst)))
	}
	src := w.Data[r*rb : (r+1)*rb]
	if err := Dequantize(w.Type, src, dst[:w.Cols]); err != nil {
		panic(fmt.Sprintf("quant: Row: %v", err))
	}
}
