package bench

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// TokenRate buckets the output tokens of successful records by arrival time
// (since the start of the run) into bins of width bin and returns the
// tokens/s of each bin, the first starting at the earliest send.
func TokenRate(recs []Record, bin time.Duration) []float64 {
	if bin <= 0 {
		return nil
	}
	start := time.Duration(math.MaxInt64)
	for i := range recs {
		start = min(start, recs[i].Sent)
	}
	var counts []float64
	for i := range recs {
		r := &recs[i]
		if r.Err != nil {
			continue
		}
		for _, c := range r.Chunks {
			b := int((r.Sent + c.At - start) / bin)
			for len(counts) <= b {
				counts = append(counts, 0)
			}
			counts[b] += float64(c.Tokens)
		}
	}
	for i := range counts {
		counts[i] /= bin.Seconds()
	}
	return counts
}

// deliveryGap is how close chunk messages must arrive to count as one
// delivery in TokenITLs: messages read from the connection together arrive
// microseconds apart, and their gaps say nothing about the server's pace.
const deliveryGap = 100 * time.Microsecond

// TokenITLs returns the request's inter-token latencies per token, as the
// plot draws them: chunks arriving within deliveryGap of the one before
// are one delivery, and a delivery of k tokens contributes k gaps of its
// interval since the delivery before / k. The first delivery, measured by
// TTFT, contributes none. (ITLs, the summary's figure, counts each chunk
// message once instead, as vLLM does.)
func (r *Record) TokenITLs() []time.Duration {
	var out []time.Duration
	var prevAt time.Duration // the previous delivery's last arrival
	for i := 0; i < len(r.Chunks); {
		start, at, k := r.Chunks[i].At, r.Chunks[i].At, r.Chunks[i].Tokens
		j := i + 1
		for ; j < len(r.Chunks) && r.Chunks[j].At-at < deliveryGap; j++ {
			at = r.Chunks[j].At
			k += r.Chunks[j].Tokens
		}
		if i > 0 && k > 0 {
			g := (start - prevAt) / time.Duration(k)
			for range k {
				out = append(out, g)
			}
		}
		prevAt = at
		i = j
	}
	return out
}

// WritePlot draws res as a PNG at path, three panels with their legends
// beside them (outside the data): the cumulative distributions of TTFT,
// TPOT, per-token ITL (TokenITLs) and end-to-end latency (log-scale ms);
// output tokens/s over the run in 60 bins (at least 10 ms) drawn as steps;
// and each request's TTFT and E2E against its requested output length.
func WritePlot(path string, res *Result) error {
	smp := collect(res.Records)
	ttft, tpot, e2e := smp.ttft, smp.tpot, smp.e2e
	var itl []float64
	for i := range res.Records {
		if r := &res.Records[i]; r.Err == nil {
			for _, d := range r.TokenITLs() {
				itl = append(itl, ms(d))
			}
		}
	}
	red := color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	blue := color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}

	cdf := plot.New()
	cdf.Title.Text = "latency CDF"
	cdf.X.Label.Text = "ms (log scale)"
	cdf.Y.Label.Text = "fraction of requests (ITL: of tokens)"
	cdf.X.Scale = plot.LogScale{}
	cdf.X.Tick.Marker = plot.LogTicks{Prec: -1}
	cdf.Add(plotter.NewGrid())
	cdfLegend := plot.NewLegend()
	series := []struct {
		name string
		xs   []float64
		c    color.RGBA
	}{
		{"TTFT", ttft, red},
		{"TPOT", tpot, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
		{"ITL per token", itl, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
		{"E2E", e2e, blue},
	}
	for _, s := range series {
		if len(s.xs) == 0 {
			continue
		}
		line, err := plotter.NewLine(cdfPoints(s.xs))
		if err != nil {
			return fmt.Errorf("plot %s: %w", s.name, err)
		}
		line.Color = s.c
		line.Width = vg.Points(1.5)
		cdf.Add(line)
		cdfLegend.Add(s.name, line)
	}

	tput := plot.New()
	tput.Title.Text = "output tokens/s over time"
	tput.X.Label.Text = "s since start"
	tput.Y.Label.Text = "tokens/s"
	tput.Add(plotter.NewGrid())
	bin := max(10*time.Millisecond, time.Duration(res.DurationS*float64(time.Second)/60))
	rate := TokenRate(res.Records, bin)
	if len(rate) > 0 {
		// Steps: each bin's rate is flat across the bin.
		pts := make(plotter.XYs, 0, 2*len(rate))
		for i, v := range rate {
			pts = append(pts, plotter.XY{X: float64(i) * bin.Seconds(), Y: v}, plotter.XY{X: float64(i+1) * bin.Seconds(), Y: v})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot tokens/s: %w", err)
		}
		line.Width = vg.Points(1.5)
		tput.Add(line)
	}
	tput.Y.Min = 0
	tput.X.Min = 0

	byLen := plot.New()
	byLen.Title.Text = "latency by requested output length"
	byLen.X.Label.Text = "output tokens requested (log scale)"
	byLen.Y.Label.Text = "ms (log scale)"
	byLen.X.Scale, byLen.Y.Scale = plot.LogScale{}, plot.LogScale{}
	byLen.X.Tick.Marker, byLen.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	byLen.Add(plotter.NewGrid())
	lenLegend := plot.NewLegend()
	var ttftPts, e2ePts plotter.XYs
	for i := range res.Records {
		r := &res.Records[i]
		if r.Err != nil || r.OutputLen < 1 {
			continue
		}
		// A small spread by index keeps the points of one length apart.
		x := float64(r.OutputLen) * (1 + 0.08*(float64(i%7)/6-0.5))
		if d, ok := r.TTFT(); ok {
			ttftPts = append(ttftPts, plotter.XY{X: x, Y: math.Max(ms(d), 1e-3)})
		}
		e2ePts = append(e2ePts, plotter.XY{X: x, Y: math.Max(ms(r.End), 1e-3)})
	}
	for _, s := range []struct {
		name string
		pts  plotter.XYs
		c    color.RGBA
	}{{"TTFT", ttftPts, red}, {"E2E", e2ePts, blue}} {
		if len(s.pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(s.pts)
		if err != nil {
			return fmt.Errorf("plot %s by length: %w", s.name, err)
		}
		sc.GlyphStyle.Color = s.c
		sc.GlyphStyle.Radius = vg.Points(2)
		byLen.Add(sc)
		lenLegend.Add(s.name, sc)
	}

	const w, h = 18 * vg.Inch, 5 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	panels := []struct {
		p      *plot.Plot
		legend *plot.Legend
	}{{cdf, &cdfLegend}, {tput, nil}, {byLen, &lenLegend}}
	pw := w / vg.Length(len(panels))
	const legendW = 1.3 * vg.Inch
	for i, pn := range panels {
		c := draw.Crop(dc, vg.Length(i)*pw, vg.Length(i+1)*pw-w, 0, 0)
		c = draw.Crop(c, vg.Millimeter*3, -vg.Millimeter*3, vg.Millimeter*3, -vg.Millimeter*3)
		if pn.legend == nil {
			pn.p.Draw(c)
			continue
		}
		dataW := c.Max.X - c.Min.X - legendW
		pn.p.Draw(draw.Crop(c, 0, -legendW, 0, 0))
		pn.legend.Top, pn.legend.Left = true, true
		pn.legend.Draw(draw.Crop(c, dataW+vg.Millimeter*2, 0, 0, -vg.Millimeter*8))
	}

	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// cdfPoints returns the empirical CDF of xs as a step-free line: the i-th
// smallest value (floored at 1µs for the log axis) at height (i+1)/n.
func cdfPoints(xs []float64) plotter.XYs {
	s := slices.Clone(xs)
	slices.Sort(s)
	pts := make(plotter.XYs, len(s))
	for i, x := range s {
		pts[i].X = math.Max(x, 1e-3)
		pts[i].Y = float64(i+1) / float64(len(s))
	}
	return pts
}
