package kernels

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Peaks are this machine's ceilings, measured on every worker of the pool
// at once: what weft bench --engine states its bounds at.
type Peaks struct {
	GFLOPS   float64 // float FMAs (2 FLOP each) in registers, 0 without SIMD kernels
	Int8GOPS float64 // VNNI int8 multiply-adds x 2, 0 where the CPU has none
	// BandwidthGBs: a streaming read of a working set well beyond the
	// last-level cache (BandwidthSets), the rate of weights read from memory.
	BandwidthGBs float64
	// CacheBandwidthGBs: repeated reads of a working set of half the
	// last-level cache, the rate of weights that stay in it from one step to
	// the next; 0 where LLCBytes is unknown.
	CacheBandwidthGBs float64
	LLCBytes          int64 // the last-level cache the working sets were sized from (LastLevelCache), 0: unknown
}

// BandwidthSets returns the bytes of the two working sets for a last-level
// cache of llc bytes: the streaming one is 4x the cache and at least
// 256 MiB, so the cache holds a small part of it; the in-cache one is half
// the cache (0 when llc is unknown), leaving room for what else runs.
func BandwidthSets(llc int64) (stream, cache int64) {
	stream = max(256<<20, 4*llc)
	if llc > 0 {
		cache = llc / 2
	}
	return stream, cache
}

// MeasurePeaks measures Peaks in a second or two, with working sets sized
// from LastLevelCache. It must not run beside other work: it takes every
// worker.
func MeasurePeaks() Peaks {
	llc := LastLevelCache()
	stream, cache := BandwidthSets(llc)
	p := measurePeaks(make([]float32, stream/4), make([]float32, cache/4))
	p.LLCBytes = llc
	return p
}

// measurePeaks measures the arithmetic peaks, the streaming bandwidth on
// stream and the in-cache bandwidth on cache (each skipped when empty).
func measurePeaks(stream, cache []float32) Peaks {
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
	if len(stream) > 0 {
		p.BandwidthGBs = readRate(stream, 1)
	}
	if len(cache) > 0 {
		// Enough passes that one timing reads about 1 GiB: a pass over a
		// cache-sized set takes well under a millisecond.
		p.CacheBandwidthGBs = readRate(cache, max(1, (1<<30)/(4*len(cache))))
	}
	return p
}

// readRate returns the read bandwidth (GB/s) of passes sweeps over buf on
// every worker, the best of eight timings after a warm-up (the best: other
// work on a shared machine only ever slows a timing down). The buffer is
// cut into 64 slices and the jobs sweep them in order, so a slice is read
// again only after all the others: a set larger than a core's private
// caches is served by the last-level cache (or memory), never by them.
func readRate(buf []float32, passes int) float64 {
	clear(buf)
	const slices = 64
	n := passes * slices
	sums := make([]float32, n)
	sweep := func() time.Duration {
		start := time.Now()
		_ = Parallel(n, func(_, i int) error {
			j := i % slices
			if lo, hi := len(buf)*j/slices, len(buf)*(j+1)/slices; lo < hi {
				sums[i] = streamSum(buf[lo:hi])
			}
			return nil
		})
		return time.Since(start)
	}
	sweep()
	best := time.Duration(1 << 62)
	for range 8 {
		best = min(best, sweep())
	}
	runtime.KeepAlive(sums)
	return float64(len(buf)*4) * float64(passes) / best.Seconds() / 1e9
}

// DecodeBandwidth returns the bandwidth (GB/s) that bounds a decode step
// reading weightBytes of weights once, and why. Weights smaller than the
// last-level cache stay in it from one step to the next, so the in-cache
// rate applies to them. Of larger weights at most the cache's size can be
// served from it (a victim or non-LRU cache keeps part of a cyclic read),
// the rest streams from memory: the bound is the time of that mix, which
// tends to the streaming rate as the weights grow. A bound must not be
// beaten, so where the in-cache figure measured below the streaming one
// the higher is taken. Without a known cache size or an in-cache figure
// the streaming rate is all there is.
func (p Peaks) DecodeBandwidth(weightBytes int64) (gbs float64, why string) {
	if p.LLCBytes <= 0 || p.CacheBandwidthGBs <= 0 {
		return p.BandwidthGBs, "last-level cache unknown: streaming bandwidth"
	}
	cache := max(p.CacheBandwidthGBs, p.BandwidthGBs)
	w, llc := formatBytes(weightBytes), formatBytes(p.LLCBytes)
	if weightBytes <= p.LLCBytes {
		return cache, fmt.Sprintf("weights (%s) fit the %s last-level cache: in-cache bandwidth", w, llc)
	}
	inCache, fromMem := float64(p.LLCBytes), float64(weightBytes-p.LLCBytes)
	gbs = float64(weightBytes) / (fromMem/p.BandwidthGBs + inCache/cache)
	return gbs, fmt.Sprintf("weights (%s) exceed the %s last-level cache: streaming bandwidth for %s, in-cache for the rest",
		w, llc, formatBytes(weightBytes-p.LLCBytes))
}

// formatBytes writes n in binary units (KiB, MiB, GiB), one decimal below
// ten units.
func formatBytes(n int64) string {
	v, unit := float64(n), "B"
	for _, u := range []string{"KiB", "MiB", "GiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	if unit == "B" {
		return fmt.Sprintf("%d B", n)
	}
	if v < 10 {
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}

// cacheDir is where Linux describes cpu0's caches, one index* directory a
// cache.
const cacheDir = "/sys/devices/system/cpu/cpu0/cache"

// LastLevelCache returns the size in bytes of cpu0's last-level cache: the
// highest-level data or unified cache Linux lists (level 3 where there is
// one), 0 where it cannot be read. On CPUs whose L3 is split between core
// complexes it is the slice cpu0 shares, the one a few compute threads see.
func LastLevelCache() int64 { return lastLevelCache(cacheDir) }

func lastLevelCache(dir string) int64 {
	idx, _ := filepath.Glob(filepath.Join(dir, "index*"))
	var level int
	var size int64
	for _, d := range idx {
		read := func(name string) string {
			b, err := os.ReadFile(filepath.Join(d, name))
			if err != nil {
				return ""
			}
			return strings.TrimSpace(string(b))
		}
		if read("type") == "Instruction" {
			continue
		}
		l, err := strconv.Atoi(read("level"))
		if err != nil {
			continue
		}
		s, err := parseCacheSize(read("size"))
		if err != nil {
			continue
		}
		if l > level || (l == level && s > size) {
			level, size = l, s
		}
	}
	return size
}

// parseCacheSize reads sysfs's cache sizes: a count of bytes with an
// optional K, M or G (binary) suffix, as in "32768K".
func parseCacheSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("cache size %q: want a positive count of bytes, K, M or G", s)
	}
	return n * mult, nil
}
