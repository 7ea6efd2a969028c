package main

import (
	"bytes"
	goruntime "runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriteVersion(t *testing.T) {
	plat := goruntime.GOOS + "/" + goruntime.GOARCH
	facts := versionFacts{Compiled: []string{"go", "c", "avx2"}, Detected: "avx2"}
	tests := []struct {
		name  string
		bi    *debug.BuildInfo
		facts versionFacts
		want  string
	}{
		{
			name: "release with vcs",
			bi: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/weft-inference/weft", Version: "v0.3.0"},
				Settings: []debug.BuildSetting{{Key: "CGO_ENABLED", Value: "1"}, {Key: "vcs.revision", Value: "abc123"},
					{Key: "vcs.time", Value: "2026-12-01T00:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			facts: versionFacts{Compiled: facts.Compiled, Detected: "avx2", CUDA: true},
			want: "weft v0.3.0\nrevision: abc123 (modified)\ncommit time: 2026-12-01T00:00:00Z\ngo: go1.26.0 " + plat +
				", CGO_ENABLED=1\ncpu kernels: go, c, avx2 compiled in; avx2 in use on this CPU\ncuda backend: compiled in (the GPU is found at run time)\n",
		},
		{
			name:  "devel without vcs",
			bi:    &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			facts: versionFacts{Compiled: []string{"go"}, Detected: "go"},
			want:  "weft (devel)\nrevision: unknown\ngo: go1.26.0 " + plat + "\ncpu kernels: go compiled in; go in use on this CPU\ncuda backend: not compiled in\n",
		},
		{
			name:  "no build info",
			facts: facts,
			want:  "weft unknown\nrevision: unknown\ngo: " + goruntime.Version() + " " + plat + "\ncpu kernels: go, c, avx2 compiled in; avx2 in use on this CPU\ncuda backend: not compiled in\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			writeVersion(&out, tc.bi, tc.facts)
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestVersionFactsFromThisBuild checks the real facts hang together: the
// set in use is one of those compiled in.
func TestVersionFactsFromThisBuild(t *testing.T) {
	f := versionEnv()
	found := false
	for _, k := range f.Compiled {
		found = found || k == f.Detected
	}
	if !found {
		t.Errorf("kernel set in use %q is not among those compiled in %q", f.Detected, f.Compiled)
	}
}
