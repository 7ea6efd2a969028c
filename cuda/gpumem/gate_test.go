package gpumem

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeSource replays free-memory readings; err, when set, fails a reading.
type fakeSource struct {
	total uint64
	free  uint64
	err   error
	calls int
}

func (f *fakeSource) Snapshot() (Info, error) {
	f.calls++
	if f.err != nil {
		return Info{}, f.err
	}
	return Info{Name: "fake", Total: f.total, Free: f.free, Used: f.total - f.free, Utilization: 0.5}, nil
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestGateHysteresis(t *testing.T) {
	src := &fakeSource{total: 100 * gib, free: 50 * gib}
	clk := &fakeClock{t: time.Unix(0, 0)}
	g, err := NewGate(src, GateConfig{PauseBelow: 10 * gib, ResumeAbove: 20 * gib, Interval: time.Second, Now: clk.now}, nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		free    uint64
		advance time.Duration
		wantOK  bool
	}{
		{free: 50 * gib, advance: time.Second, wantOK: true},
		{free: 9 * gib, advance: 100 * time.Millisecond, wantOK: true}, // cached reading
		{free: 9 * gib, advance: time.Second, wantOK: false},           // below: pause
		{free: 15 * gib, advance: time.Second, wantOK: false},          // between: still paused
		{free: 20 * gib, advance: time.Second, wantOK: true},           // at resume: go
		{free: 15 * gib, advance: time.Second, wantOK: true},           // between: still going
		{free: 1 * gib, advance: time.Second, wantOK: false},
	}
	for i, s := range steps {
		src.free = s.free
		clk.t = clk.t.Add(s.advance)
		ok, reason := g.AdmitOK()
		if ok != s.wantOK {
			t.Fatalf("step %d (free %s): AdmitOK = %v (%q), want %v", i, GiB(s.free), ok, reason, s.wantOK)
		}
		if !ok && !strings.Contains(reason, "below") {
			t.Errorf("step %d: reason %q does not say why", i, reason)
		}
		if ok && reason != "" {
			t.Errorf("step %d: admitted with reason %q", i, reason)
		}
	}
	if got := testutil.ToFloat64(g.pauses); got != 2 {
		t.Errorf("pauses counter = %v, want 2", got)
	}
	if got := testutil.ToFloat64(g.pausedGauge); got != 1 {
		t.Errorf("paused gauge = %v, want 1", got)
	}
	// A failed reading keeps the last decision (paused).
	src.err = errors.New("nvml gone")
	clk.t = clk.t.Add(time.Second)
	if ok, _ := g.AdmitOK(); ok {
		t.Error("after a failed reading: admitted, want the paused decision kept")
	}
}

func TestGateDefaults(t *testing.T) {
	src := &fakeSource{total: 100 * gib, free: 1 * gib}
	g, err := NewGate(src, GateConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.cfg.PauseBelow != 2*gib || g.cfg.ResumeAbove != 3*gib {
		t.Errorf("defaults: pause %d resume %d, want 2%% and 3%% of total", g.cfg.PauseBelow, g.cfg.ResumeAbove)
	}
	if ok, _ := g.AdmitOK(); ok {
		t.Error("free 1% at start: admitted")
	}
	if _, err := NewGate(src, GateConfig{PauseBelow: 10, ResumeAbove: 5}, nil); err == nil {
		t.Error("resume below pause: no error")
	}
	if _, err := NewGate(&fakeSource{err: errors.New("x")}, GateConfig{}, nil); err == nil {
		t.Error("failing source: no error")
	}
}

func TestCollector(t *testing.T) {
	src := &fakeSource{total: 80 * gib, free: 30 * gib}
	c := NewCollector(src)
	want := `
# HELP weft_gpu_memory_free_bytes GPU memory free, from NVML.
# TYPE weft_gpu_memory_free_bytes gauge
weft_gpu_memory_free_bytes{gpu="fake"} 3.221225472e+10
# HELP weft_gpu_memory_total_bytes GPU memory in total, from NVML.
# TYPE weft_gpu_memory_total_bytes gauge
weft_gpu_memory_total_bytes{gpu="fake"} 8.589934592e+10
# HELP weft_gpu_memory_used_bytes GPU memory in use (all processes), from NVML.
# TYPE weft_gpu_memory_used_bytes gauge
weft_gpu_memory_used_bytes{gpu="fake"} 5.36870912e+10
# HELP weft_gpu_utilization_ratio Fraction of the last NVML sample period in which a kernel ran.
# TYPE weft_gpu_utilization_ratio gauge
weft_gpu_utilization_ratio{gpu="fake"} 0.5
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	src.err = errors.New("nvml gone")
	if err := testutil.CollectAndCompare(c, strings.NewReader("")); err == nil {
		t.Error("failing source: scrape did not report an error")
	}
}
