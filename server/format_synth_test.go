package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	inferencev1 "github.com/weft-inference/weft/api/inference/v1"
	"github.com/weft-inference/weft/internal/frontdoor"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/constrain/constraintest"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/llama"
	"github.com/weft-inference/weft/scheduler"
)

// synthMaxTokens is the budget of one constrained generation on
// synth-110m. Its weights are random, so inside a free string (most of
// the 32,000 tokens allowed, few of them containing a quote) it rarely
// chooses to close: outputs of schemas with unbounded strings mostly reach
// this budget, the others end well inside it.
const synthMaxTokens = 160

// synthSeeds is the number of seeds per case on synth-110m.
const synthSeeds = 3

// synth is synth-110m, generated once per test binary (TestMain removes
// the directory).
var synth struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if synth.dir != "" {
		os.RemoveAll(synth.dir)
	}
	os.Exit(code)
}

// synthModel returns the path of synth-110m in Q8_0 with the Llama-2
// 32,000-token SentencePiece vocabulary, written by weft's own generator
// (what `weft gen-model --preset synth-110m --type Q8_0` writes). Q8_0 is
// the fastest of the generator's types here both to write (about 2.5 s,
// 137 MiB) and to run (about 560 tokens/s at 16 sequences, 920 at 64, on
// two Zen 4 cores; Q4_0 decodes at about a third of that).
func synthModel(t *testing.T) string {
	t.Helper()
	vocab := shareddata.Path(t, "vocab/ggml-vocab-llama-spm.gguf")
	synth.once.Do(func() {
		synth.dir, synth.err = os.MkdirTemp("", "weft-synth-")
		if synth.err == nil {
			synth.path = filepath.Join(synth.dir, "synth-110m-Q8_0.gguf")
			synth.err = writeSynth(vocab, synth.path)
		}
	})
	if synth.err != nil {
		t.Fatalf("generating synth-110m: %v", synth.err)
	}
	return synth.path
}

func writeSynth(vocab, path string) error {
	vf, err := gguf.Open(vocab)
	if err != nil {
		return err
	}
	defer vf.Close() // after Generate, which reads the copied keys
	cfg, err := llama.Preset("synth-110m")
	if err != nil {
		return err
	}
	cfg.Type, cfg.VocabSize, cfg.Tokenizer = gguf.TypeQ8_0, 0, nil
	for _, kv := range vf.KVs {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			cfg.Tokenizer = append(cfg.Tokenizer, kv)
		}
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	err = llama.Generate(cfg, w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// synthServer serves model path on the CPU backend behind a Server on
// bufconn, with room for every request of a test at once: up to maxSeqs
// decode together and the rest wait in the queue.
func synthServer(t *testing.T, path string, maxSeqs, maxWaiting int) (inferencev1.InferenceServiceClient, *scheduler.Scheduler) {
	t.Helper()
	m, err := runtime.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	const blockSize = 16
	perSeq := (16 + synthMaxTokens + blockSize - 1) / blockSize // a short prompt and the budget
	b, err := m.NewCPUBackend(cpu.Config{BlockSize: blockSize, KVType: "f16", NumBlocks: maxSeqs * perSeq})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	kv := b.KV()
	sched, err := scheduler.New(scheduler.Config{
		BlockSize: kv.BlockSize, NumBlocks: kv.NumBlocks, MaxSeqs: maxSeqs, MaxWaiting: maxWaiting,
		ContextLen: min(m.HP.ContextLen, kv.NumBlocks*kv.BlockSize),
		NewDecoder: func() scheduler.TextDecoder { return m.Tok.NewStreamDecoder() },
		IsEOG:      m.Tok.IsEOG, VocabSize: m.HP.VocabSize,
	}, runtime.NewEngine(b, m.HP.VocabSize))
	if err != nil {
		t.Fatal(err)
	}
	client := serveOverBufconn(t, sched, frontdoor.Config{Tokenizer: m.Tok, Chat: chat.Default()},
		Config{Tokenizer: m.Tok, Info: ModelInfo{Name: m.Name, VocabSize: m.HP.VocabSize}})
	return client, sched
}

// synthCase is one constrained request of TestResponseFormatSynth110m
// and the check of an output that ended.
type synthCase struct {
	name  string
	seed  uint64
	f     *inferencev1.ResponseFormat
	check func(text string) error
}

// TestResponseFormatSynth110m runs every test schema, regex, GBNF grammar
// and the choice case, each with several seeds at temperature 1, on
// synth-110m: real forward passes over the Llama-2 32,000-token
// vocabulary, with its multi-byte and byte-fallback pieces. All requests
// are submitted at once, so the scheduler batches them continuously
// (sequences of different formats and states decode in the same steps and
// join as others end). Every output that ended on EOS parses and validates
// against its schema with an independent validator (or matches Go's
// regexp, or passes its grammar's check); every output cut by max_tokens
// says LENGTH after exactly max_tokens tokens, and is counted apart.
func TestResponseFormatSynth110m(t *testing.T) {
	data, err := os.ReadFile("../runtime/constrain/testdata/schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var schemas []formatCase
	if err := json.Unmarshal(data, &schemas); err != nil {
		t.Fatal(err)
	}
	var cases []synthCase
	for _, fc := range schemas {
		sch := compileValidator(t, fc.Schema)
		f := &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_JsonSchema{
			JsonSchema: &inferencev1.JsonSchema{Schema: string(fc.Schema), Strict: true, Name: fc.Name}}}
		check := func(text string) error {
			inst, err := jsonschemaParse(text)
			if err != nil {
				return fmt.Errorf("does not parse: %w", err)
			}
			return sch.Validate(inst)
		}
		for seed := range uint64(synthSeeds) {
			cases = append(cases, synthCase{"schema " + fc.Name, seed, f, check})
		}
	}
	for _, expr := range constraintest.Regexes {
		re := constraintest.WholeMatch(expr)
		f := &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_Regex{Regex: expr}}
		check := func(text string) error {
			if !re.MatchString(text) {
				return fmt.Errorf("does not match")
			}
			return nil
		}
		for seed := range uint64(synthSeeds) {
			cases = append(cases, synthCase{"regex " + expr, seed, f, check})
		}
	}
	for _, gc := range constraintest.Grammars {
		f := &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_Grammar{Grammar: gc.Text}}
		check := func(text string) error { return gc.Check([]byte(text)) }
		for seed := range uint64(synthSeeds) {
			cases = append(cases, synthCase{"grammar " + gc.Name, seed, f, check})
		}
	}
	choice := &inferencev1.ResponseFormat{Format: &inferencev1.ResponseFormat_Choice{
		Choice: &inferencev1.Choice{Values: constraintest.Choices}}}
	for seed := range uint64(synthSeeds) {
		cases = append(cases, synthCase{"choice", seed, choice, func(text string) error {
			for _, v := range constraintest.Choices {
				if text == v {
					return nil
				}
			}
			return fmt.Errorf("is not a choice")
		}})
	}

	client, sched := synthServer(t, synthModel(t), 32, len(cases))
	ctx := context.Background()
	res := make([]genResult, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Go(func() {
			s, err := client.Generate(ctx, &inferencev1.GenerateRequest{
				Prompt:         &inferencev1.GenerateRequest_Text{Text: "Once upon a time"},
				Sampling:       &inferencev1.SamplingParams{Temperature: 1, Seed: proto.Uint64(c.seed)},
				Stopping:       &inferencev1.StoppingCriteria{MaxTokens: synthMaxTokens},
				ResponseFormat: c.f,
			})
			if err != nil {
				res[i] = genResult{err: err}
				return
			}
			res[i] = collect(s)
		})
	}
	wg.Wait()

	ended, cut := 0, 0
	cutBy := map[string]int{}
	for i, r := range res {
		c := cases[i]
		if r.err != nil {
			t.Fatalf("%s seed %d: %v", c.name, c.seed, r.err)
		}
		switch r.final.GetFinishReason() {
		case inferencev1.FinishReason_FINISH_REASON_EOS:
			ended++
			if err := c.check(r.text); err != nil {
				t.Errorf("%s seed %d: %q: %v", c.name, c.seed, r.text, err)
			}
		case inferencev1.FinishReason_FINISH_REASON_LENGTH:
			cut++
			cutBy[c.name]++
			if len(r.tokens) != synthMaxTokens {
				t.Errorf("%s seed %d: LENGTH after %d tokens", c.name, c.seed, len(r.tokens))
			}
		default:
			t.Errorf("%s seed %d: finish reason %v", c.name, c.seed, r.final.GetFinishReason())
		}
	}
	st := sched.Stats()
	t.Logf("%d outputs: %d ended on EOS and validated, %d cut at max_tokens=%d %v", len(cases), ended, cut, synthMaxTokens, cutBy)
	t.Logf("%d generated tokens in %d steps (%.1f sequences per step)", st.GenerationTokens, st.Steps, float64(st.GenerationTokens)/float64(st.Steps))
	// The cases without an unbounded free string end; see synthMaxTokens.
	if ended < len(cases)*3/4 {
		t.Errorf("only %d of %d outputs ended", ended, len(cases))
	}
	if float64(st.GenerationTokens) < 4*float64(st.Steps) {
		t.Errorf("%d tokens in %d steps: the requests were not batched", st.GenerationTokens, st.Steps)
	}
}
