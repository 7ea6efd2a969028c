//go:build !cgo

package kernels

import "unsafe"

func attendFast(f16 bool, out, q []float32, nq int, k, v unsafe.Pointer, kv PagedKV, n int, scale float32, sinks, scratch []float32) bool {
	return false
}

func attendQ8Fast(out, q []float32, nq int, kq []int8, kd []float32, vq []int8, vd []float32, kv PagedKV, n int, scale float32, sinks, scratch []float32) bool {
	return false
}

func attendChunkFast(out, q []float32, ldq, T, nh, hd int, kt, v []float32, m, pos0, window int, scale float32, sinks []float32, round bool, scratch []float32) bool {
	return false
}

func panelKFast(kt, k []float32, p0, n, hd int) bool { return false }
