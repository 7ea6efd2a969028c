//go:build cgo

package kernels

// #include "kernels.h"
import "C"

import "unsafe"

func init() {
	if C.WATT_SEG != attnSeg || C.WATT_TILE != attnTile || C.WATT_KP != kPanel {
		panic("kernels: attention segment, tile or K panel size differs between Go and C")
	}
}

// attendFast runs the C attention kernel; k and v point at the first
// element of the (uint16 when f16, else float32) K and V arrays.
func attendFast(f16 bool, out, q []float32, nq int, k, v unsafe.Pointer, kv PagedKV, n int, scale float32, sinks, scratch []float32) bool {
	wh := 0
	if f16 {
		wh = 1
	}
	isa := min(activeISA, isaAVX512) - isaC
	C.watt_attend(C.int(isa), C.int(wh), (*C.float)(&out[0]), (*C.float)(&q[0]), C.int(nq), k, v,
		(*C.int32_t)(unsafe.Pointer(&kv.Blocks[0])), C.long(kv.BlockSize), C.long(kv.Stride), C.long(kv.Off),
		C.int(kv.HeadDim), C.int(kv.First), C.int(n), C.float(scale), sinkPtr(sinks), (*C.float)(&scratch[0]))
	return true
}

// attendQ8Fast runs the C attention kernel on a Q8_0 cache (with int8 K
// scores where the CPU has VNNI and the head dim is a multiple of 64).
func attendQ8Fast(out, q []float32, nq int, kq []int8, kd []float32, vq []int8, vd []float32, kv PagedKV, n int, scale float32, sinks, scratch []float32) bool {
	isa := min(activeISA, isaVNNI) - isaC
	C.watt_attend_q8(C.int(isa), (*C.float)(&out[0]), (*C.float)(&q[0]), C.int(nq),
		(*C.int8_t)(unsafe.Pointer(&kq[0])), (*C.float)(&kd[0]), (*C.int8_t)(unsafe.Pointer(&vq[0])), (*C.float)(&vd[0]),
		(*C.int32_t)(unsafe.Pointer(&kv.Blocks[0])), C.long(kv.BlockSize), C.long(kv.Stride), C.long(kv.Off),
		C.int(kv.HeadDim), C.int(kv.First), C.int(n), C.float(scale), sinkPtr(sinks), (*C.float)(&scratch[0]))
	return true
}

// attendChunkFast runs the C kernel of AttendChunk.
func attendChunkFast(out, q []float32, ldq, T, nh, hd int, kt, v []float32, m, pos0, window int, scale float32, sinks []float32, round bool, scratch []float32) bool {
	wh := 0
	if round {
		wh = 1
	}
	isa := min(activeISA, isaAVX512) - isaC
	C.watt_attend_chunk(C.int(isa), (*C.float)(&out[0]), (*C.float)(&q[0]), C.long(ldq), C.int(T), C.int(nh), C.int(hd),
		(*C.float)(&kt[0]), (*C.float)(&v[0]), C.int(m), C.int(pos0), C.int(window), C.float(scale), sinkPtr(sinks), C.int(wh),
		(*C.float)(&scratch[0]))
	return true
}

// panelKFast runs the C loop of PanelK.
func panelKFast(kt, k []float32, p0, n, hd int) bool {
	C.watt_panel_k((*C.float)(&kt[0]), (*C.float)(&k[0]), C.int(p0), C.int(n), C.int(hd))
	return true
}

// sinkPtr is the C view of an optional sinks slice (NULL for nil).
func sinkPtr(sinks []float32) *C.float {
	if len(sinks) == 0 {
		return nil
	}
	return (*C.float)(&sinks[0])
}
