package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/chat"
	"github.com/weft-inference/weft/runtime/cpu"
	"github.com/weft-inference/weft/runtime/sample"
)

// fakeBackend writes logits that make token (Seq % vocab) the argmax, or
// NaN for sequences listed in nan.
type fakeBackend struct {
	vocab int
	nan   map[uint64]bool
	err   error
	calls int
}

func (f *fakeBackend) Forward(ctx context.Context, seqs []batch.SeqStep, logits [][]float32) error {
	f.calls++
	if f.err != nil {
		return f.err
	}
	for i, s := range seqs {
		if logits[i] == nil {
			continue
		}
		for j := range logits[i] {
			logits[i][j] = 0
		}
		if f.nan[s.Seq] {
			logits[i][0] = float32(math.NaN())
			continue
		}
		logits[i][int(s.Seq)%f.vocab] = 10
	}
	return nil
}
func (f *fakeBackend) KV() batch.KVInfo { return batch.KVInfo{} }
func (f *fakeBackend) Name() string     { return "fake" }
func (f *fakeBackend) Close() error     { return nil }

func TestEngineStep(t *testing.T) {
	const vocab = 32
	for _, n := range []int{1, 3, 9} { // below and above the parallel threshold
		fb := &fakeBackend{vocab: vocab, nan: map[uint64]bool{4: true}}
		e := NewEngine(fb, vocab)
		var seqs []batch.SeqStep
		var samplers []*sample.Sampler
		for i := range n {
			st := batch.SeqStep{Seq: uint64(i + 1), Tokens: []int32{1}}
			var smp *sample.Sampler
			if i%3 != 2 { // every third is a prompt chunk without a sampler
				st.Logits, smp = true, sample.New(sample.Params{}, nil)
			}
			seqs = append(seqs, st)
			samplers = append(samplers, smp)
		}
		res, err := e.Step(context.Background(), seqs, samplers)
		var se batch.StepErrors
		wantFail := n > 3 // sequence 4 (index 3) has NaN logits
		if wantFail {
			if !errors.As(err, &se) || len(se) != 1 || se[0].Index != 3 || !errors.Is(se[0], batch.ErrNonFinite) {
				t.Fatalf("n=%d: err = %v, want one ErrNonFinite at index 3", n, err)
			}
		} else if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		for i, s := range seqs {
			if !s.Logits || se.Failed(i) {
				continue
			}
			if got, want := res[i].Token, int32(s.Seq)%vocab; got != want {
				t.Errorf("n=%d: seq %d sampled %d, want %d", n, s.Seq, got, want)
			}
		}
	}
}

func TestEngineBackendError(t *testing.T) {
	boom := errors.New("boom")
	e := NewEngine(&fakeBackend{vocab: 4, err: boom}, 4)
	_, err := e.Step(context.Background(), []batch.SeqStep{{Seq: 1, Tokens: []int32{0}, Logits: true}}, []*sample.Sampler{sample.New(sample.Params{}, nil)})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
}

// TestEngineStepSamplersMatchLogits checks that samplers must be given
// exactly for the sequences that ask for logits: anything else fails the
// step before the backend runs.
func TestEngineStepSamplersMatchLogits(t *testing.T) {
	smp := sample.New(sample.Params{}, nil)
	for _, tc := range []struct {
		name     string
		seqs     []batch.SeqStep
		samplers []*sample.Sampler
	}{
		{"fewer samplers", []batch.SeqStep{{Seq: 1, Tokens: []int32{0}, Logits: true}}, nil},
		{"logits without sampler", []batch.SeqStep{{Seq: 1, Tokens: []int32{0}, Logits: true}}, []*sample.Sampler{nil}},
		{"sampler without logits", []batch.SeqStep{{Seq: 1, Tokens: []int32{0}}}, []*sample.Sampler{smp}},
	} {
		fb := &fakeBackend{vocab: 4}
		if _, err := NewEngine(fb, 4).Step(context.Background(), tc.seqs, tc.samplers); err == nil || fb.calls != 0 {
			t.Errorf("%s: err %v after %d Forward calls, want an error and none", tc.name, err, fb.calls)
		}
	}
}

func TestLoadDefault(t *testing.T) {
	a, err := LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !a.Synthetic || a.Name != DefaultModelName || a.ChatTemplate == "" {
		t.Errorf("built-in model: synthetic %v, name %q, template %q", a.Synthetic, a.Name, a.ChatTemplate)
	}
	if !strings.Contains(DefaultModelNotice, "NOT a trained model") {
		t.Errorf("notice %q does not say it is not trained", DefaultModelNotice)
	}
	if a.TemplateErr != nil {
		t.Errorf("built-in chat template: %v", a.TemplateErr)
	}
	out, err := a.Template.Render([]chat.Message{{Role: "user", Content: "hi"}}, true)
	if err != nil || out != "<|user|>\nhi</s>\n<|assistant|>\n" {
		t.Errorf("built-in template renders %q, %v", out, err)
	}
	// Deterministic: the same greedy tokens twice.
	ga, gb := greedyIDs(t, a, "Hello there", 16), greedyIDs(t, b, "Hello there", 16)
	if diff := cmp.Diff(ga, gb); diff != "" {
		t.Errorf("two built-in models differ:\n%s", diff)
	}
}

// greedyIDs generates n tokens greedily through the Engine and CPU backend.
func greedyIDs(t *testing.T, m *Model, prompt string, n int) []int32 {
	t.Helper()
	ids := m.Tok.Encode(prompt, true, true)
	be, err := m.NewCPUBackend(cpu.Config{KVType: "f32", BlockSize: 16, NumBlocks: 16})
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(be, m.HP.VocabSize)
	smp := sample.New(sample.Params{}, ids)
	blocks := make([]int32, 16)
	for i := range blocks {
		blocks[i] = int32(i)
	}
	var out []int32
	toks, pos := ids, 0
	for range n {
		res, err := e.Step(context.Background(), []batch.SeqStep{{Seq: 1, Tokens: toks, Pos: pos, Blocks: blocks, Logits: true}}, []*sample.Sampler{smp})
		if err != nil {
			t.Fatal(err)
		}
		pos += len(toks)
		out = append(out, res[0].Token)
		toks = []int32{res[0].Token}
	}
	return out
}

func TestLoadStories260K(t *testing.T) {
	m, err := Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	data, err := os.ReadFile(shareddata.Path(t, "golden/stories260K-F32.greedy64.kvf32.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Results []struct {
			Prompt            string
			PromptTokenIDs    []int32 `json:"prompt_token_ids"`
			GeneratedTokenIDs []int32 `json:"generated_token_ids"`
		}
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if m.TypeSummary() != "F32:48" {
		t.Errorf("type summary %q", m.TypeSummary())
	}
	for _, r := range g.Results {
		if diff := cmp.Diff(r.PromptTokenIDs, m.Tok.Encode(r.Prompt, true, true)); diff != "" {
			t.Errorf("%q prompt ids:\n%s", r.Prompt, diff)
		}
		if diff := cmp.Diff(r.GeneratedTokenIDs[:32], greedyIDs(t, m, r.Prompt, 32)); diff != "" {
			t.Errorf("%q generated ids (-golden +got):\n%s", r.Prompt, diff)
		}
	}
}

func TestLoadRefusesMissingFile(t *testing.T) {
	if _, err := Load(t.TempDir() + "/nope.gguf"); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
}
