package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/cpu"
)

// --pprof adds Go's profiles beside /metrics; without it they are not
// served. A heap profile arrives as pprof's gzipped protobuf.
func TestServePprof(t *testing.T) {
	m, err := runtime.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, on := range []bool{false, true} {
		b, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: "f16", Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		var args []string
		if on {
			args = append(args, "--pprof")
		}
		_, _, maddr := startServeArgs(t, serveDeps{Model: m, Backend: b, BackendWhy: "--backend cpu"}, args...)
		resp, err := http.Get("http://" + maddr + "/debug/pprof/heap")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !on {
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("without --pprof: /debug/pprof/heap status %d, want 404", resp.StatusCode)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("--pprof: /debug/pprof/heap status %d: %s", resp.StatusCode, body)
		}
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("--pprof: the heap profile is not gzipped: %v", err)
		}
		if _, err := io.ReadAll(zr); err != nil {
			t.Errorf("--pprof: reading the heap profile: %v", err)
		}
		resp, err = http.Get("http://" + maddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, name := range []string{"weft_num_requests_running", "weft_cpu_scratch_bytes", "weft_cpu_scratch_sets"} {
			if !strings.Contains(string(metrics), "\n"+name+" ") {
				t.Errorf("/metrics has no %s", name)
			}
		}
	}
}

func TestServePprofNeedsMetricsAddr(t *testing.T) {
	c, err := parseServeFlags([]string{"--pprof", "--metrics-addr", ""})
	if err == nil {
		err = c.validate()
	}
	if err == nil || !strings.Contains(err.Error(), "--pprof") {
		t.Errorf("--pprof with no --metrics-addr: %v, want an error naming --pprof", err)
	}
}
