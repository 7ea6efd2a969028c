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

// WritePlot draws res as a PNG at path: on the left the cumulative
// distributions of TTFT, TPOT, ITL and end-to-end latency (log-scale ms),
// on the right output tokens/s over the run.
func WritePlot(path string, res *Result) error {
	smp := collect(res.Records)
	ttft, tpot, itl, e2e := smp.ttft, smp.tpot, smp.itl, smp.e2e

	cdf := plot.New()
	cdf.Title.Text = "latency CDF"
	cdf.X.Label.Text = "ms (log scale)"
	cdf.Y.Label.Text = "fraction of requests (ITL: of gaps)"
	cdf.X.Scale = plot.LogScale{}
	cdf.X.Tick.Marker = plot.LogTicks{Prec: -1}
	cdf.Add(plotter.NewGrid())
	series := []struct {
		name string
		xs   []float64
		c    color.RGBA
	}{
		{"TTFT", ttft, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
		{"TPOT", tpot, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
		{"ITL", itl, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
		{"E2E", e2e, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
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
		cdf.Legend.Add(s.name, line)
	}
	cdf.Legend.Top = false
	cdf.Legend.Left = false

	tput := plot.New()
	tput.Title.Text = "output tokens/s over time"
	tput.X.Label.Text = "s since start"
	tput.Y.Label.Text = "tokens/s"
	tput.Add(plotter.NewGrid())
	bin := max(250*time.Millisecond, time.Duration(res.DurationS*float64(time.Second)/60))
	rate := TokenRate(res.Records, bin)
	if len(rate) > 0 {
		pts := make(plotter.XYs, len(rate))
		for i, v := range rate {
			pts[i].X = (float64(i) + 0.5) * bin.Seconds()
			pts[i].Y = v
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot tokens/s: %w", err)
		}
		line.Width = vg.Points(1.5)
		tput.Add(line)
	}
	tput.Y.Min = 0

	const w, h = 12 * vg.Inch, 4.5 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{{cdf, tput}}, tiles, dc)
	cdf.Draw(canvases[0][0])
	tput.Draw(canvases[0][1])

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
