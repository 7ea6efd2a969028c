package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
)

// TestEstimateMemory: serve's estimate, made from the file's header before
// loading, names the weights the loaded model maps, the expert share of a
// MoE file, and the KV pool the backend then gets; the log line says so.
func TestEstimateMemory(t *testing.T) {
	path := shareddata.Path(t, "synth/arch2/models/synth-qwen3moe-256-Q8_0.gguf")
	c, err := parseServeFlags([]string{"--model", path, "--kv-memory", "1MiB"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	e, err := estimateMemory(c, path, log)
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if w := weightsBytes(m); e.Weights != w {
		t.Errorf("estimated weights %d bytes, the loaded model maps %d", e.Weights, w)
	}
	if e.Count != m.HP.MoE.Experts || e.Used != m.HP.MoE.Used || e.Experts == 0 || e.Experts >= e.Weights {
		t.Errorf("experts: %d of %d used, %d of %d bytes", e.Used, e.Count, e.Experts, e.Weights)
	}
	cc, err := servePool(c, m, log)
	if err != nil {
		t.Fatal(err)
	}
	if cc.NumBlocks != e.KV.NumBlocks || e.KV.KVBytes == 0 || e.KV.KVBytes > 1<<20 {
		t.Errorf("estimated KV pool %d blocks (%d bytes); the backend gets %d blocks", e.KV.NumBlocks, e.KV.KVBytes, cc.NumBlocks)
	}
	if e.Step == 0 || e.Total() != e.Weights+e.KV.KVBytes+e.Step {
		t.Errorf("step buffers %d, total %d", e.Step, e.Total())
	}
	e.log(log)
	for _, want := range []string{"expected resident memory", "memory-mapped", "8 experts, 2 read per token"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, buf.String())
		}
	}
	e.RAM = e.Total() - 1
	buf.Reset()
	e.log(log)
	if !strings.Contains(buf.String(), "exceed RAM") {
		t.Errorf("an estimate above RAM is not warned about:\n%s", buf.String())
	}
}
