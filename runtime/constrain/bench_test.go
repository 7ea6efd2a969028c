package constrain

import (
	"math/rand/v2"
	"testing"
)

// benchSchemas are the schemas whose mask cost BENCHMARKS.md reports.
var benchSchemas = []string{"object-nested", "ref-recursive", "string", "json-object"}

func schemaByName(tb testing.TB, name string) string {
	for _, sc := range loadSchemas(tb) {
		if sc.Name == name {
			return string(sc.Schema)
		}
	}
	tb.Fatalf("no schema %q", name)
	return ""
}

// trace generates one output at the 32,000-token vocabulary and returns
// its tokens.
func trace(tb testing.TB, tv *testVocab, g *Grammar, seed uint64) []int32 {
	c := NewConstraint(g, tv.v, tv.pieces)
	seq := c.Start()
	rng := rand.New(rand.NewPCG(seed, 1))
	var toks []int32
	for range maxGen {
		m := seq.Allowed()
		best, bestW := int32(-1), float32(-1)
		for t := range tv.pieces {
			if m[t>>6]&(1<<(t&63)) != 0 {
				if w := 3*rng.Float32() + tv.bias[t]; w > bestW {
					best, bestW = int32(t), w
				}
			}
		}
		if best < 0 || tv.tok.IsEOG(best) {
			break
		}
		toks = append(toks, best)
		if err := seq.Accept(best); err != nil {
			tb.Fatal(err)
		}
	}
	return toks
}

// BenchmarkMask measures the per-token cost of a constraint at the
// 32,000-token vocabulary: Allowed (the mask) and Accept for each token of
// a generated output. "cached": masks already cached (the steady state of
// a schema used before); "cold": a fresh Constraint each time, so every
// state's mask is computed by the trie walk.
func BenchmarkMask(b *testing.B) {
	tv := loadVocab(b, "llama-32k", "vocab/ggml-vocab-llama-spm.gguf")
	for _, name := range benchSchemas {
		g, err := CompileJSONSchema(schemaByName(b, name))
		if err != nil {
			b.Fatal(err)
		}
		toks := trace(b, tv, g, 1)
		run := func(b *testing.B, fresh bool) {
			c := NewConstraint(g, tv.v, tv.pieces)
			n := 0
			for b.Loop() {
				if fresh {
					c = NewConstraint(g, tv.v, tv.pieces)
				}
				seq := c.Start()
				for _, t := range toks {
					_ = seq.Allowed()
					_ = seq.Accept(t)
				}
				n += len(toks)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/token")
			b.ReportMetric(float64(len(toks)), "tokens")
		}
		b.Run(name+"/cached", func(b *testing.B) { run(b, false) })
		b.Run(name+"/cold", func(b *testing.B) { run(b, true) })
	}
}

// BenchmarkCompile measures compiling each test schema (the server then
// caches the result by its text: a repeated schema is a map lookup).
func BenchmarkCompile(b *testing.B) {
	for _, sc := range loadSchemas(b) {
		b.Run(sc.Name, func(b *testing.B) {
			for b.Loop() {
				if _, err := CompileJSONSchema(string(sc.Schema)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVocab measures building the token trie of the 32,000-token
// vocabulary (once per model).
func BenchmarkVocab(b *testing.B) {
	tv := loadVocab(b, "llama-32k", "vocab/ggml-vocab-llama-spm.gguf")
	for b.Loop() {
		NewVocab(tv.pieces, tv.tok.EOGs())
	}
}

// BenchmarkCacheHit measures a repeated format: a Cache lookup by its
// text (what a request with a schema seen before pays).
func BenchmarkCacheHit(b *testing.B) {
	tv := loadVocab(b, "llama-32k", "vocab/ggml-vocab-llama-spm.gguf")
	c := NewCache(tv.pieces, tv.tok.EOGs(), 64)
	f := Format{JSONSchema: schemaByName(b, "object-nested")}
	if _, err := c.Get(f); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := c.Get(f); err != nil {
			b.Fatal(err)
		}
	}
}
