package gpumem

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// GateConfig configures a Gate.
type GateConfig struct {
	// PauseBelow pauses admission when free memory falls below this many
	// bytes. 0 means 2% of the device's total memory at the first reading.
	PauseBelow uint64
	// ResumeAbove resumes admission once free memory is at least this many
	// bytes (hysteresis; must be >= PauseBelow). 0 means 1.5 x PauseBelow.
	ResumeAbove uint64
	// Interval is how long a snapshot is reused before NVML is asked again,
	// so a step loop does not call NVML every step. 0 means 250ms.
	Interval time.Duration
	// Now is the clock; nil means time.Now. Tests inject a fake.
	Now func() time.Time
}

func (c *GateConfig) validate(total uint64) error {
	if c.PauseBelow == 0 {
		c.PauseBelow = total / 50
	}
	if c.ResumeAbove == 0 {
		c.ResumeAbove = c.PauseBelow + c.PauseBelow/2
	}
	if c.ResumeAbove < c.PauseBelow {
		return fmt.Errorf("gpumem: gate resume threshold %d is below pause threshold %d", c.ResumeAbove, c.PauseBelow)
	}
	if c.Interval < 0 {
		return fmt.Errorf("gpumem: gate interval %v is negative", c.Interval)
	}
	if c.Interval == 0 {
		c.Interval = 250 * time.Millisecond
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Gate is the scheduler's capacity gate backed by live GPU memory: AdmitOK
// says no while free memory is low. It is meant for one goroutine (the
// scheduler's); Collect may run concurrently and only reads two gauges.
type Gate struct {
	src    Source
	cfg    GateConfig
	log    *slog.Logger
	last   time.Time
	paused bool
	reason string
	failed bool // last snapshot failed (logged once per failure streak)

	pausedGauge prometheus.Gauge
	pauses      prometheus.Counter
}

var _ prometheus.Collector = (*Gate)(nil)

// NewGate returns a gate over src. It reads src once to fill defaults that
// depend on the device's total memory. log may be nil.
func NewGate(src Source, cfg GateConfig, log *slog.Logger) (*Gate, error) {
	info, err := src.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("gpumem: gate: first reading: %w", err)
	}
	if err := cfg.validate(info.Total); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gate{
		src: src, cfg: cfg, log: log,
		pausedGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weft_gpu_admission_paused",
			Help: "1 while admission is paused because free GPU memory is below the safety margin.",
		}),
		pauses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weft_gpu_admission_pauses_total",
			Help: "Times admission was paused for low free GPU memory.",
		}),
	}
	g.observe(info)
	g.last = cfg.Now()
	return g, nil
}

// AdmitOK reports whether new sequences may be admitted now; when not, reason
// says why (free memory and the thresholds). A failed NVML read keeps the
// previous decision.
func (g *Gate) AdmitOK() (ok bool, reason string) {
	now := g.cfg.Now()
	if now.Sub(g.last) >= g.cfg.Interval {
		g.last = now
		info, err := g.src.Snapshot()
		if err != nil {
			if !g.failed {
				g.log.Warn("gpu memory gate: reading failed; keeping the last decision", "err", err, "paused", g.paused)
			}
			g.failed = true
		} else {
			g.failed = false
			g.observe(info)
		}
	}
	return !g.paused, g.reason
}

func (g *Gate) observe(info Info) {
	switch {
	case !g.paused && info.Free < g.cfg.PauseBelow:
		g.paused = true
		g.reason = fmt.Sprintf("gpu free memory %s is below the %s safety margin (resumes at %s)",
			GiB(info.Free), GiB(g.cfg.PauseBelow), GiB(g.cfg.ResumeAbove))
		g.pauses.Inc()
		g.pausedGauge.Set(1)
		g.log.Warn("gpu memory gate: pausing admission", "free", info.Free, "pause_below", g.cfg.PauseBelow, "resume_above", g.cfg.ResumeAbove, "gpu", info.Name)
	case g.paused && info.Free >= g.cfg.ResumeAbove:
		g.paused = false
		g.reason = ""
		g.pausedGauge.Set(0)
		g.log.Info("gpu memory gate: resuming admission", "free", info.Free, "resume_above", g.cfg.ResumeAbove, "gpu", info.Name)
	case g.paused:
		g.reason = fmt.Sprintf("gpu free memory %s is below the %s safety margin (resumes at %s)",
			GiB(info.Free), GiB(g.cfg.PauseBelow), GiB(g.cfg.ResumeAbove))
	}
}

// Describe implements prometheus.Collector.
func (g *Gate) Describe(ch chan<- *prometheus.Desc) {
	g.pausedGauge.Describe(ch)
	g.pauses.Describe(ch)
}

// Collect implements prometheus.Collector.
func (g *Gate) Collect(ch chan<- prometheus.Metric) {
	g.pausedGauge.Collect(ch)
	g.pauses.Collect(ch)
}
