package server

import (
	"sync"
	"testing"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/scheduler"
)

// TestResponseFormatPreemption runs constrained requests on stories260K
// with a KV pool too small for all of them, so sequences are preempted
// and re-prefilled: each sequence's constraint state lives in its sampler,
// which survives preemption, and every output that ends still validates.
func TestResponseFormatPreemption(t *testing.T) {
	m, err := runtime.Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b, err := m.NewCPUBackend(cpu.Config{BlockSize: 16, KVType: "f32", NumBlocks: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	kv := b.KV()
	ctxLen := min(m.HP.ContextLen, kv.NumBlocks*kv.BlockSize)
	sched, err := scheduler.New(scheduler.Config{
		BlockSize: kv.BlockSize, NumBlocks: kv.NumBlocks, MaxSeqs: 6, MaxWaiting: 16, ContextLen: ctxLen,
		NewDecoder: func() scheduler.TextDecoder { return m.Tok.NewStreamDecoder() },
		IsEOG:      m.Tok.IsEOG, VocabSize: m.HP.VocabSize,
	}, runtime.NewEngine(b, m.HP.VocabSize))
	if err != nil {
		t.Fatal(err)
	}
	client := serveOverBufconn(t, sched, frontdoor.Config{Tokenizer: m.Tok},
		Config{Tokenizer: m.Tok, Info: ModelInfo{Name: m.Name, VocabSize: m.HP.VocabSize}})

	schema := `{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer","minimum":0,"maximum":999},"ok":{"type":"boolean"}},"required":["id","ok"],"additionalProperties":false},"minItems":3,"maxItems":4}`
	sch := compileValidator(t, []byte(schema))
	f := &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_JsonSchema{JsonSchema: &inferencev1.JsonSchema{Schema: schema}}}
	const n = 6
	res := make([]genResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req := constrainedReq("Once upon a time", uint64(i), f)
			req.Stopping.MaxTokens = 150
			s, err := client.Generate(t.Context(), req)
			if err != nil {
				res[i] = genResult{err: err}
				return
			}
			res[i] = collect(s)
		})
	}
	wg.Wait()
	ended := 0
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("request %d: %v", i, r.err)
		}
		if r.final.GetFinishReason() != inferencev1.FinishReason_FINISH_REASON_EOS {
			continue
		}
		ended++
		inst, err := jsonschemaParse(r.text)
		if err != nil {
			t.Fatalf("request %d: %q: %v", i, r.text, err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Fatalf("request %d: %q: %v", i, r.text, err)
		}
	}
	if p := sched.Stats().Preemptions; p == 0 {
		t.Errorf("no preemption happened; the test does not test it")
	}
	if ended == 0 {
		t.Error("no output ended")
	}
	t.Logf("%d preemptions, %d of %d outputs ended and validated", sched.Stats().Preemptions, ended, n)
}
