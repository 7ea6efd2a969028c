package kernels

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestMeasurePeaks(t *testing.T) {
	p := measurePeaks(make([]float32, 4<<20), make([]float32, 1<<20))
	t.Logf("%v kernels: %+v", ISA(), p)
	if !(p.BandwidthGBs > 0) {
		t.Errorf("bandwidth %v, want > 0", p.BandwidthGBs)
	}
	if !(p.CacheBandwidthGBs > 0) {
		t.Errorf("in-cache bandwidth %v, want > 0", p.CacheBandwidthGBs)
	}
	if activeISA >= isaAVX2 && !(p.GFLOPS > 0) {
		t.Errorf("%v kernels: GFLOPS %v, want > 0", ISA(), p.GFLOPS)
	}
	if (activeISA == isaVNNI) != (p.Int8GOPS > 0) {
		t.Errorf("%v kernels: Int8GOPS %v", ISA(), p.Int8GOPS)
	}
}

// TestStreamSum: the bandwidth readers read every float once, on every
// kernel set (small integers keep the float sums exact in any order).
func TestStreamSum(t *testing.T) {
	for _, n := range []int{1, 7, 63, 64, 127, 128, 129, 1000, 4099} {
		p := make([]float32, n)
		var want float32
		for i := range p {
			p[i] = float32(i%7 - 3)
			want += p[i]
		}
		for _, isa := range availableISAs() {
			old := setISA(isa)
			if got := streamSum(p); got != want {
				t.Errorf("%v kernels, n=%d: sum %v, want %v", isa, n, got, want)
			}
			setISA(old)
		}
	}
}

func TestBandwidthSets(t *testing.T) {
	for _, tc := range []struct {
		llc, stream, cache int64
	}{
		{0, 256 << 20, 0},
		{32 << 20, 256 << 20, 16 << 20},
		{64 << 20, 256 << 20, 32 << 20},
		{105 << 20, 420 << 20, 105 << 19},
		{512 << 20, 2 << 30, 256 << 20},
	} {
		if s, c := BandwidthSets(tc.llc); s != tc.stream || c != tc.cache {
			t.Errorf("llc %d: sets %d, %d; want %d, %d", tc.llc, s, c, tc.stream, tc.cache)
		}
	}
}

func TestDecodeBandwidth(t *testing.T) {
	const llc = 32 << 20
	// mix: weights of w MiB, 32 MiB of them from the cache at c GB/s and
	// the rest from memory at s GB/s.
	mix := func(w, s, c float64) float64 { return w / ((w-32)/s + 32/c) }
	for _, tc := range []struct {
		name    string
		p       Peaks
		weights int64
		want    float64
		why     string
	}{
		{"weights beyond the cache", Peaks{BandwidthGBs: 25, CacheBandwidthGBs: 90, LLCBytes: llc}, 160 << 20, mix(160, 25, 90),
			"weights (160 MiB) exceed the 32 MiB last-level cache: streaming bandwidth for 128 MiB, in-cache for the rest"},
		{"weights far beyond the cache", Peaks{BandwidthGBs: 25, CacheBandwidthGBs: 90, LLCBytes: llc}, 32 << 30, mix(32<<10, 25, 90),
			"weights (32 GiB) exceed the 32 MiB last-level cache: streaming bandwidth for 32 GiB, in-cache for the rest"},
		{"weights in the cache", Peaks{BandwidthGBs: 25, CacheBandwidthGBs: 90, LLCBytes: llc}, 20 << 20, 90,
			"weights (20 MiB) fit the 32 MiB last-level cache: in-cache bandwidth"},
		{"weights the cache's size", Peaks{BandwidthGBs: 25, CacheBandwidthGBs: 90, LLCBytes: llc}, llc, 90,
			"weights (32 MiB) fit the 32 MiB last-level cache: in-cache bandwidth"},
		{"in-cache measured below streaming", Peaks{BandwidthGBs: 30, CacheBandwidthGBs: 20, LLCBytes: llc}, 1 << 20, 30,
			"weights (1.0 MiB) fit the 32 MiB last-level cache: in-cache bandwidth"},
		{"in-cache below streaming, weights beyond", Peaks{BandwidthGBs: 30, CacheBandwidthGBs: 20, LLCBytes: llc}, 64 << 20, 30,
			"weights (64 MiB) exceed the 32 MiB last-level cache: streaming bandwidth for 32 MiB, in-cache for the rest"},
		{"cache unknown", Peaks{BandwidthGBs: 25}, 1 << 20, 25, "last-level cache unknown: streaming bandwidth"},
		{"no in-cache figure", Peaks{BandwidthGBs: 25, LLCBytes: llc}, 1 << 20, 25, "last-level cache unknown: streaming bandwidth"},
		{"small weights", Peaks{BandwidthGBs: 25, CacheBandwidthGBs: 90, LLCBytes: 110 << 20}, 1000, 90,
			"weights (1000 B) fit the 110 MiB last-level cache: in-cache bandwidth"},
	} {
		got, why := tc.p.DecodeBandwidth(tc.weights)
		if math.Abs(got-tc.want) > 1e-9*tc.want || why != tc.why {
			t.Errorf("%s: %v, %q; want %v, %q", tc.name, got, why, tc.want, tc.why)
		}
		// Never below the streaming rate, never above the in-cache one.
		if got < tc.p.BandwidthGBs || got > max(tc.p.BandwidthGBs, tc.p.CacheBandwidthGBs) {
			t.Errorf("%s: %v outside [%v, %v]", tc.name, got, tc.p.BandwidthGBs, max(tc.p.BandwidthGBs, tc.p.CacheBandwidthGBs))
		}
	}
}

// TestLastLevelCache reads a sysfs tree: the highest level that is not an
// instruction cache wins; unreadable entries are skipped.
func TestLastLevelCache(t *testing.T) {
	dir := t.TempDir()
	for i, c := range []struct{ level, typ, size string }{
		{"1", "Data", "48K"},
		{"1", "Instruction", "32K"},
		{"2", "Unified", "2048K"},
		{"3", "Unified", "105M"},
		{"4", "Instruction", "1G"},
		{"5", "Unified", "lots"},
	} {
		d := filepath.Join(dir, "index"+string(rune('0'+i)))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"level": c.level, "type": c.typ, "size": c.size + "\n"} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := lastLevelCache(dir), int64(105<<20); got != want {
		t.Errorf("last-level cache %d, want %d", got, want)
	}
	if got := lastLevelCache(filepath.Join(dir, "none")); got != 0 {
		t.Errorf("no cache directory: %d, want 0", got)
	}
	t.Logf("this machine: %d bytes", LastLevelCache())
}

func TestParseCacheSize(t *testing.T) {
	for s, want := range map[string]int64{"32768K": 32 << 20, "1M": 1 << 20, "2G": 2 << 30, "512": 512} {
		if got, err := parseCacheSize(s); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "K", "-1K", "0", "12Q"} {
		if _, err := parseCacheSize(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
