// Package shareddata locates the read-only data directory (../shared) that
// tests and benchmarks read models, golden outputs and tokenizer vectors from.
//
// The directory is $WEFT_SHARED when set, else the folder "shared" beside the
// repository root. A test that needs it and cannot find it fails: it never
// skips, so CI cannot pass by silently not testing.
package shareddata

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir returns the shared data directory or "" if it cannot be found.
func Dir() string {
	if d := os.Getenv("WEFT_SHARED"); d != "" {
		return d
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	// file is <root>/internal/shareddata/shareddata.go
	root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	d := filepath.Join(filepath.Dir(root), "shared")
	if st, err := os.Stat(d); err == nil && st.IsDir() {
		return d
	}
	return ""
}

// Path returns the path of rel inside the shared directory, failing tb if the
// directory or the file is missing.
func Path(tb testing.TB, rel string) string {
	tb.Helper()
	d := Dir()
	if d == "" {
		tb.Fatalf("shared data directory not found: set WEFT_SHARED or place it at ../shared beside the repository")
	}
	p := filepath.Join(d, rel)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("shared data file missing: %v", err)
	}
	return p
}
