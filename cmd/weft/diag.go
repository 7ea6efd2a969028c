package main

import (
	"fmt"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-inference/weft/runtime/kernels"
)

// mountPprof serves Go's runtime profiles under /debug/pprof/ on mux
// (weft serve --pprof): the index, the named profiles (heap, allocs,
// goroutine, block, mutex, threadcreate), cmdline, a CPU profile and an
// execution trace. `go tool pprof http://ADDR/debug/pprof/heap` reads them.
func mountPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// registerScratchMetrics adds the CPU kernels' scratch arena to reg:
// weft_cpu_scratch_bytes and weft_cpu_scratch_sets (kernels.Scratch).
func registerScratchMetrics(reg *prometheus.Registry) error {
	for _, g := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "weft_cpu_scratch_bytes",
			Help: "Bytes the CPU kernels' scratch buffers hold."},
			func() float64 { b, _ := kernels.Scratch(); return float64(b) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "weft_cpu_scratch_sets",
			Help: "Sets of CPU kernel scratch buffers: the most matrix products that ran at once."},
			func() float64 { _, n := kernels.Scratch(); return float64(n) }),
	} {
		if err := reg.Register(g); err != nil {
			return fmt.Errorf("registering the kernels' scratch metrics: %w", err)
		}
	}
	return nil
}
