package main

import (
	"context"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strings"

	"github.com/weft-inference/weft/cuda"
	"github.com/weft-inference/weft/runtime/kernels"
)

func init() {
	register(command{name: "version", short: "print the version, build and kernel sets (also weft --version)",
		run: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unexpected arguments %q", args)
			}
			bi, _ := debug.ReadBuildInfo()
			writeVersion(os.Stdout, bi, versionEnv())
			return nil
		}})
}

// versionFacts are what the version report says beyond the build info
// (separate so tests can fix them).
type versionFacts struct {
	Compiled []string // kernel sets built in (kernels.CompiledISAs)
	Detected string   // the set this CPU runs (kernels.ISA)
	CUDA     bool     // the binary has the CUDA backend
}

func versionEnv() versionFacts {
	return versionFacts{Compiled: kernels.CompiledISAs(), Detected: kernels.ISA(), CUDA: cuda.Compiled}
}

// writeVersion prints the module version, the VCS revision, time and
// modified flag, the Go version and platform, and the kernel sets. bi may
// be nil (a binary built without module support).
func writeVersion(w io.Writer, bi *debug.BuildInfo, f versionFacts) {
	version, goVersion := "unknown", goruntime.Version()
	settings := map[string]string{}
	if bi != nil {
		version, goVersion = bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
	}
	rev := settings["vcs.revision"]
	if rev == "" {
		rev = "unknown"
	}
	if settings["vcs.modified"] == "true" {
		rev += " (modified)"
	}
	fmt.Fprintf(w, "weft %s\n", version)
	fmt.Fprintf(w, "revision: %s\n", rev)
	if t := settings["vcs.time"]; t != "" {
		fmt.Fprintf(w, "commit time: %s\n", t)
	}
	fmt.Fprintf(w, "go: %s %s/%s", goVersion, goruntime.GOOS, goruntime.GOARCH)
	if c, ok := settings["CGO_ENABLED"]; ok {
		fmt.Fprintf(w, ", CGO_ENABLED=%s", c)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "cpu kernels: %s compiled in; %s in use on this CPU\n", strings.Join(f.Compiled, ", "), f.Detected)
	cuda := "not compiled in"
	if f.CUDA {
		cuda = "compiled in (the GPU is found at run time)"
	}
	fmt.Fprintf(w, "cuda backend: %s\n", cuda)
}
