package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weft-inference/weft/internal/shareddata"
)

func TestWeightsDecision(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		mode   string
		size   int64
		avail  uint64
		err    error
		thp    string
		copyIt bool
		why    string
	}{
		{"mapped", gib, 20 * gib, nil, "madvise", false, "--weights mapped"},
		{"memory", gib, 0, errors.New("x"), "never", true, "--weights memory"},
		{"auto", gib, 20 * gib, nil, "madvise", true, "--weights auto"},
		{"", gib, 20 * gib, nil, "always", true, "--weights auto"},
		{"auto", gib, 20 * gib, nil, "never", false, "transparent huge pages are never"},
		{"auto", gib, 20 * gib, nil, "", false, "transparent huge pages are unknown"},
		{"auto", gib, 0, errors.New("no meminfo"), "madvise", false, "available memory unknown: no meminfo"},
		{"auto", 10 * gib, 10*gib + weightsSpare - 1, nil, "madvise", false, "would leave less than 0.50 GiB of the 10.50 GiB available"},
		{"auto", 10 * gib, 10*gib + weightsSpare, nil, "madvise", true, "--weights auto"},
	} {
		copyIt, why := weightsDecision(c.mode, c.size, c.avail, c.err, c.thp)
		if copyIt != c.copyIt || !strings.Contains(why, c.why) {
			t.Errorf("weightsDecision(%q, %d, %d, %v, %q) = %v, %q; want %v, %q", c.mode, c.size, c.avail, c.err, c.thp, copyIt, why, c.copyIt, c.why)
		}
	}
}

// Both placements of the weights generate llama.cpp's tokens, and the
// backend says where the weights are.
func TestGenerateWeights(t *testing.T) {
	model := shareddata.Path(t, "models/stories260K.gguf")
	var ids [][]int32
	for _, c := range []struct{ mode, want string }{
		{"memory", "weights in memory"},
		{"mapped", "weights mapped (--weights mapped)"},
	} {
		if c.mode == "memory" && runtime.GOOS != "linux" {
			continue // ToMemory is Linux's
		}
		var out bytes.Buffer
		args := []string{"--model", model, "--prompt", "Once upon a time", "--max-tokens", "24", "--temperature", "0",
			"--format", "json", "--backend", "cpu", "--weights", c.mode}
		if err := generateCmd(context.Background(), args, &out, io.Discard); err != nil {
			t.Fatalf("--weights %s: %v", c.mode, err)
		}
		var res generateResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.Backend, c.want) {
			t.Errorf("--weights %s: backend %q does not say %q", c.mode, res.Backend, c.want)
		}
		ids = append(ids, res.TokenIDs)
	}
	if len(ids) == 2 {
		if diff := cmp.Diff(ids[1], ids[0]); diff != "" {
			t.Errorf("tokens with the weights in memory differ from mapped (-mapped +memory):\n%s", diff)
		}
	}
}
