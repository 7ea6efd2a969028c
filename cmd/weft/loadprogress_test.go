package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPreloadProgress(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(path, make([]byte, 1000), 0o600); err != nil {
		t.Fatal(err)
	}

	// Not a terminal: one log line per tenth.
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	var w bytes.Buffer
	if err := preload(path, 0, 100, &w, false, log); err != nil {
		t.Fatal(err)
	}
	var percents []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		_, p, _ := strings.Cut(line, "percent=")
		p, _, _ = strings.Cut(p, " ")
		percents = append(percents, p)
	}
	if diff := cmp.Diff([]string{"10", "20", "30", "40", "50", "60", "70", "80", "90", "100"}, percents); diff != "" {
		t.Errorf("log percents (-want +got):\n%s\n%s", diff, logs.String())
	}
	if w.Len() != 0 {
		t.Errorf("no bar without a terminal, got %q", w.String())
	}

	// A terminal: the bar redrawn in place, ending at 100% and a newline.
	logs.Reset()
	if err := preload(path, 0, 400, &w, true, log); err != nil {
		t.Fatal(err)
	}
	bars := strings.Split(w.String(), "\r")
	if len(bars) < 4 || !strings.HasSuffix(w.String(), "] 100% 0.00/0.00 GiB\n") || logs.Len() != 0 {
		t.Errorf("bar output %q, logs %q", w.String(), logs.String())
	}
	if got, want := progressBar("m.gguf", 1<<29, 1<<30), "loading m.gguf [###############...............]  50% 0.50/1.00 GiB"; got != want {
		t.Errorf("progressBar = %q, want %q", got, want)
	}

	// Small files are left alone; missing ones are runtime.Load's to report.
	w.Reset()
	if err := preload(path, 1001, 100, &w, true, log); err != nil || w.Len() != 0 || logs.Len() != 0 {
		t.Errorf("file under minSize: err %v, output %q %q", err, w.String(), logs.String())
	}
	if err := preload(filepath.Join(t.TempDir(), "nope"), 0, 100, &w, true, log); err != nil || w.Len() != 0 {
		t.Errorf("missing file: err %v, output %q", err, w.String())
	}
}
