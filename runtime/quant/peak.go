package quant

import (
	"runtime"
	"time"
)

// Peaks are this machine's ceilings, measured on every worker of the pool
// at once: what weft bench --engine states its bounds at.
type Peaks struct {
	GFLOPS       float64 // float FMAs (2 FLOP each) in registers, 0 without SIMD kernels
	Int8GOPS     float64 // VNNI int8 multiply-adds x 2, 0 where the CPU has none
	BandwidthGBs float64 // streaming read of a buffer far larger than the caches
}

// MeasurePeaks measures Peaks in about a second, reading buf (cleared and
// then summed; 256 MiB or more keeps the caches out of it). It must not
// run beside other work: it takes every worker.
func MeasurePeaks(buf []float32) Peaks {
	var p Peaks
	const pieces = 64
	rate := func(kind int) float64 {
		iters := 1 << 16
		for {
			start := time.Now()
			ops := make([]float64, pieces)
			_ = Parallel(pieces, func(_, i int) error { ops[i] = peakOps(kind, iters); return nil })
			el := time.Since(start)
			var total float64
			for _, o := range ops {
				total += o
			}
			if total == 0 {
				return 0
			}
			if el > 200*time.Millisecond || iters > 1<<30 {
				return total / el.Seconds() / 1e9
			}
			iters *= 4
		}
	}
	p.GFLOPS = rate(0)
	p.Int8GOPS = rate(1)
	if len(buf) > 0 {
		clear(buf)
		sums := make([]float32, pieces)
		best := time.Duration(1 << 62)
		for range 3 {
			start := time.Now()
			_ = Parallel(pieces, func(_, i int) error {
				lo, hi := len(buf)*i/pieces, len(buf)*(i+1)/pieces
				if lo < hi {
					sums[i] = streamSum(buf[lo:hi])
				}
				return nil
			})
			best = min(best, time.Since(start))
		}
		runtime.KeepAlive(sums)
		p.BandwidthGBs = float64(len(buf)*4) / best.Seconds() / 1e9
	}
	return p
}
