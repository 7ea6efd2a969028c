package bench

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progress draws a one-line progress bar, redrawn in place with '\r', from
// its own goroutine until stop. A nil *progress does nothing.
type progress struct {
	w        io.Writer
	total    int           // requests expected, or 0
	duration time.Duration // run length, or 0
	start    time.Time
	ok, bad  atomic.Int64
	quit     chan struct{}
	wg       sync.WaitGroup
}

func startProgress(w io.Writer, total int, duration time.Duration) *progress {
	p := &progress{w: w, total: total, duration: duration, start: time.Now(), quit: make(chan struct{})}
	p.wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				p.draw()
				fmt.Fprintln(p.w)
				return
			case <-t.C:
				p.draw()
			}
		}
	})
	return p
}

func (p *progress) done(failed bool) {
	if p == nil {
		return
	}
	if failed {
		p.bad.Add(1)
	} else {
		p.ok.Add(1)
	}
}

func (p *progress) stop() {
	if p == nil {
		return
	}
	close(p.quit)
	p.wg.Wait()
}

func (p *progress) draw() {
	const width = 30
	el := time.Since(p.start)
	n := int(p.ok.Load() + p.bad.Load())
	frac := 0.0
	switch {
	case p.total > 0:
		frac = float64(n) / float64(p.total)
	case p.duration > 0:
		frac = el.Seconds() / p.duration.Seconds()
	}
	frac = min(max(frac, 0), 1)
	fill := int(frac * width)
	bar := strings.Repeat("#", fill) + strings.Repeat(".", width-fill)
	of := ""
	if p.total > 0 {
		of = fmt.Sprintf("/%d", p.total)
	}
	fmt.Fprintf(p.w, "\r[%s] %d%s done, %d failed, %.1fs ", bar, n, of, p.bad.Load(), el.Seconds())
}
