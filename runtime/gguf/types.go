package gguf

import "fmt"

// Type is a ggml tensor element type as stored in GGUF tensor infos.
type Type uint32

// The ggml tensor types weft knows by name. Values are the on-disk numbers.
const (
	TypeF32    Type = 0
	TypeF16    Type = 1
	TypeQ4_0   Type = 2
	TypeQ4_1   Type = 3
	TypeQ5_0   Type = 6
	TypeQ5_1   Type = 7
	TypeQ8_0   Type = 8
	TypeQ8_1   Type = 9
	TypeQ2_K   Type = 10
	TypeQ3_K   Type = 11
	TypeQ4_K   Type = 12
	TypeQ5_K   Type = 13
	TypeQ6_K   Type = 14
	TypeQ8_K   Type = 15
	TypeIQ4_NL Type = 20
	TypeIQ4_XS Type = 23
	TypeBF16   Type = 30
	TypeMXFP4  Type = 39
)

type typeTraits struct {
	name      string
	blockLen  int // elements per block
	blockSize int // bytes per block
}

var traits = map[Type]typeTraits{
	TypeF32:  {"F32", 1, 4},
	TypeF16:  {"F16", 1, 2},
	TypeBF16: {"BF16", 1, 2},
	TypeQ4_0: {"Q4_0", 32, 2 + 16},
	TypeQ4_1: {"Q4_1", 32, 2 + 2 + 16},
	TypeQ5_0: {"Q5_0", 32, 2 + 4 + 16},
	TypeQ5_1: {"Q5_1", 32, 2 + 2 + 4 + 16},
	TypeQ8_0: {"Q8_0", 32, 2 + 32},
	TypeQ8_1: {"Q8_1", 32, 4 + 4 + 32},
	TypeQ2_K: {"Q2_K", 256, 16 + 64 + 2 + 2},
	TypeQ3_K: {"Q3_K", 256, 32 + 64 + 12 + 2},
	TypeQ4_K: {"Q4_K", 256, 2 + 2 + 12 + 128},
	TypeQ5_K: {"Q5_K", 256, 2 + 2 + 12 + 32 + 128},
	TypeQ6_K: {"Q6_K", 256, 128 + 64 + 16 + 2},
	TypeQ8_K: {"Q8_K", 256, 4 + 256 + 32},
	// IQ4_NL: f16 scale, 32 4-bit indices into a fixed non-linear table.
	TypeIQ4_NL: {"IQ4_NL", 32, 2 + 16},
	// IQ4_XS: f16 super-block scale, 8 6-bit sub-block scales (2 high
	// bits each in a uint16, 4 low bits each in 4 bytes), 256 4-bit indices.
	TypeIQ4_XS: {"IQ4_XS", 256, 2 + 2 + 4 + 128},
	// MXFP4: an E8M0 (power of two) scale byte, 32 4-bit E2M1 values.
	TypeMXFP4: {"MXFP4", 32, 1 + 16},
}

// Known reports whether weft knows t's block layout.
func (t Type) Known() bool { _, ok := traits[t]; return ok }

// String is the ggml name of the type ("Q4_K"), or "type(N)" when unknown.
func (t Type) String() string {
	if tr, ok := traits[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockLen is the number of elements in one block (1 for float types).
func (t Type) BlockLen() int { return traits[t].blockLen }

// BlockSize is the number of bytes in one block.
func (t Type) BlockSize() int { return traits[t].blockSize }

// RowBytes returns the bytes taken by n elements of type t, or an error when
// n is not a whole number of blocks or t is unknown.
func (t Type) RowBytes(n int) (int, error) {
	tr, ok := traits[t]
	if !ok {
		return 0, fmt.Errorf("gguf: unknown tensor type %d", uint32(t))
	}
	if n < 0 || n%tr.blockLen != 0 {
		return 0, fmt.Errorf("gguf: %d elements is not a whole number of %s blocks (%d)", n, tr.name, tr.blockLen)
	}
	return n / tr.blockLen * tr.blockSize, nil
}
