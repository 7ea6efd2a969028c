package frontdoor

import (
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/tokenizer"
	"github.com/weft-inference/weft/runtime/toolcall"
	"github.com/weft-inference/weft/scheduler"
)

// BenchmarkToolConstraint measures the per-token cost of tool choice
// required's grammar (two tools, hermes, one call) at the 32,000-token
// Llama vocabulary of synth-110m: Allowed (the mask) and Accept for each
// token of calls drawn at random from the allowed tokens. "cached": the
// Door's compiled grammar with its masks computed by earlier calls (a
// server's steady state); "cold": a fresh compile per call.
//
//	go test -run '^$' -bench BenchmarkToolConstraint ./internal/frontdoor
func BenchmarkToolConstraint(b *testing.B) {
	f, err := gguf.Open(shareddata.Path(b, "vocab/ggml-vocab-llama-spm.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	newDoor := func() *Door {
		d, err := New(Config{Tokenizer: tok, ToolFormat: "hermes", Logger: slog.New(slog.DiscardHandler),
			Limits: scheduler.Limits{ContextLen: 4096, MaxPromptTokens: 4095, MaxTokens: 4096, DefaultMaxTokens: 16}})
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	defs := []ToolDef{
		{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":12},` +
			`"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}`)},
		{Name: "get_time", Parameters: json.RawMessage(`{"type":"object","properties":{"zone":{"enum":["utc","local"]}},"required":["zone"]}`)},
	}
	spec := func(d *Door) *ToolSpec {
		s, err := d.ToolSpec(defs, ToolChoiceRequired, "", false)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	// Calls drawn at random among the allowed tokens (closing ones
	// favoured, so strings end), each checked by the hermes parser.
	d := newDoor()
	c, err := d.ToolConstraint(spec(d))
	if err != nil {
		b.Fatal(err)
	}
	var calls [][]int32
	rng := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		st := c.NewState()
		var toks []int32
		for len(toks) < 400 {
			m := st.Allowed()
			best, bestW := int32(-1), -1.0
			for t := range int32(tok.VocabSize()) {
				if m[t>>6]&(1<<(t&63)) == 0 {
					continue
				}
				w := rng.Float64()
				if p := tok.TokenBytes(t); len(p) == 1 && (p[0] == '"' || p[0] == '}') {
					w += 0.5
				}
				if w > bestW {
					best, bestW = t, w
				}
			}
			if best < 0 || tok.IsEOG(best) {
				break
			}
			toks = append(toks, best)
			if err := st.Accept(best); err != nil {
				b.Fatal(err)
			}
		}
		p := toolcall.NewParser(toolcall.FormatHermes, toolcall.Options{})
		evs := p.Push(tok.Decode(toks))
		if _, err := p.Finish(); err != nil || len(evs) == 0 {
			b.Fatalf("drawn call %q does not parse: %v", tok.Decode(toks), err)
		}
		calls = append(calls, toks)
	}
	run := func(b *testing.B, cold bool) {
		n := 0
		for b.Loop() {
			for _, toks := range calls {
				if cold {
					d = newDoor()
					if c, err = d.ToolConstraint(spec(d)); err != nil {
						b.Fatal(err)
					}
				}
				st := c.NewState()
				for _, t := range toks {
					_ = st.Allowed()
					_ = st.Accept(t)
				}
				n += len(toks)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/token")
		b.ReportMetric(float64(n)/float64(b.N)/float64(len(calls)), "tokens/call")
	}
	b.Run("cached", func(b *testing.B) { run(b, false) })
	b.Run("cold", func(b *testing.B) { run(b, true) })
}
