package main

import (
	"net/http"
	"net/http/pprof"
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
