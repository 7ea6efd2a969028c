package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// preloadMin is the smallest model file whose loading shows progress:
// smaller ones load in a moment.
const preloadMin = 256 << 20

// preloadModel reads a model file of at least preloadMin bytes once, front
// to back, before runtime.Load maps it, and shows the progress on stderr:
// a bar redrawn in place on a terminal, a log line every 10% otherwise.
// The pages it reads stay in the page cache, so the mapping that follows
// (and the first steps, which touch every weight) do not wait on the disk
// again; reading is what takes the time when a large model loads.
func preloadModel(path string, log *slog.Logger) error {
	return preload(path, preloadMin, 8<<20, os.Stderr, isTerminal(os.Stderr), log)
}

// preload is preloadModel with its sizes and outputs given: files under
// minSize are left alone; chunk bytes are read at a time; on a terminal
// (tty) the bar goes to w, else lines to log.
func preload(path string, minSize, chunk int64, w io.Writer, tty bool, log *slog.Logger) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // runtime.Load says why, with its context
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	total := st.Size()
	if total < minSize || total == 0 {
		return nil
	}
	name := filepath.Base(path)
	buf := make([]byte, chunk)
	var done int64
	lastTenth := int64(0)
	for {
		n, err := f.Read(buf)
		done += int64(n)
		if tty {
			fmt.Fprintf(w, "\r%s", progressBar(name, done, total))
		} else if tenth := done * 10 / total; tenth > lastTenth {
			lastTenth = tenth
			log.Info("reading model file", "file", name, "percent", tenth*10, "read", gib(done), "size", gib(total))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			if tty {
				fmt.Fprintln(w)
			}
			return fmt.Errorf("reading %s: %w", path, err)
		}
	}
	if tty {
		fmt.Fprintln(w)
	}
	return nil
}

// progressBar is "NAME [#####.....]  50% 1.00/2.00 GiB".
func progressBar(name string, done, total int64) string {
	const width = 30
	filled := int(done * width / total)
	return fmt.Sprintf("loading %s [%s%s] %3d%% %s/%s", name, strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		done*100/total, strings.TrimSuffix(gib(done), " GiB"), gib(total))
}

func gib(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }
