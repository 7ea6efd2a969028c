package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/batch"
	"github.com/weft-inference/weft/runtime/cpu"
)

func TestGenerateJSONMatchesGolden(t *testing.T) {
	data, err := os.ReadFile(shareddata.Path(t, "golden/stories260K-F32.greedy64.kvf16.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Results []struct {
			Prompt            string  `json:"prompt"`
			PromptTokenIDs    []int32 `json:"prompt_token_ids"`
			GeneratedTokenIDs []int32 `json:"generated_token_ids"`
			GeneratedText     string  `json:"generated_text"`
		} `json:"results"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	model := shareddata.Path(t, "models/stories260K.gguf")
	for _, r := range g.Results {
		var out bytes.Buffer
		args := []string{"--model", model, "--prompt", r.Prompt, "--max-tokens", "64", "--temperature", "0", "--format", "json"}
		if err := generateCmd(context.Background(), args, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		var res generateResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("output is not one JSON object: %v\n%s", err, out.String())
		}
		if diff := cmp.Diff(r.PromptTokenIDs, res.PromptTokenIDs); diff != "" {
			t.Errorf("%q prompt ids:\n%s", r.Prompt, diff)
		}
		if diff := cmp.Diff(r.GeneratedTokenIDs, res.TokenIDs); diff != "" {
			t.Errorf("%q token ids (-golden +got):\n%s", r.Prompt, diff)
		}
		if res.Text != r.GeneratedText || res.FinishReason != "length" {
			t.Errorf("%q: text %q finish %q, want %q length", r.Prompt, res.Text, res.FinishReason, r.GeneratedText)
		}
	}
}

func TestGenerateBuiltinText(t *testing.T) {
	var out bytes.Buffer
	if err := generateCmd(context.Background(), []string{"--prompt", "Hello", "--max-tokens", "8", "--kv-type", "f32"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "\n") || out.Len() < 2 {
		t.Errorf("text output %q", out.String())
	}
}

// TestGenerateKVQ8 generates with a Q8_0 KV cache on a model whose head
// dim allows it (synth-256: 64), and refuses it, naming the reason, on the
// built-in stories260K (head dim 8) and on the CUDA backend.
func TestGenerateKVQ8(t *testing.T) {
	model := shareddata.Path(t, "synth/models/synth-256-F32.gguf")
	var out bytes.Buffer
	if err := generateCmd(context.Background(), []string{"--model", model, "--prompt", "Once upon a time", "--max-tokens", "8",
		"--kv-type", "q8_0", "--format", "json"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "kv q8_0") {
		t.Errorf("output %q does not name the q8_0 cache in its backend", out.String())
	}
	err := generateCmd(context.Background(), []string{"--prompt", "Hello", "--max-tokens", "2", "--kv-type", "q8_0"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "multiple of 32") {
		t.Errorf("q8_0 on stories260K: %v, want the head dim's error", err)
	}
	err = generateCmd(context.Background(), []string{"--prompt", "Hello", "--kv-type", "q8_0", "--backend", "cuda"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "CPU backend only") {
		t.Errorf("q8_0 on --backend cuda: %v, want the CPU-only error", err)
	}
}

func TestGenerateRejectsFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--max-tokens", "0"},
		{"--format", "xml"},
		{"--kv-type", "q8"},
		{"--weights", "anon"},
		{"--temperature", "-1"},
		{"extra"},
	} {
		if err := generateCmd(context.Background(), args, &bytes.Buffer{}, io.Discard); err == nil {
			t.Errorf("generate %q succeeded", args)
		}
	}
}

func TestTokenizeJSON(t *testing.T) {
	model := shareddata.Path(t, "models/stories260K.gguf")
	tests := []struct {
		args  []string
		stdin string
		want  []int32
	}{
		{[]string{"--text", "Once upon a time"}, "", []int32{1, 403, 407, 261, 378}},
		{[]string{"--text", "Once upon a time", "--no-bos"}, "", []int32{403, 407, 261, 378}},
		{[]string{"--text", "-"}, "Once upon a time", []int32{1, 403, 407, 261, 378}},
		{[]string{"--text", ""}, "", []int32{1}},
	}
	for _, tc := range tests {
		var out bytes.Buffer
		args := append([]string{"--model", model, "--format", "json"}, tc.args...)
		if err := tokenizeCmd(args, strings.NewReader(tc.stdin), &out); err != nil {
			t.Fatal(err)
		}
		var got struct{ IDs []int32 }
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%q: %v", out.String(), err)
		}
		if diff := cmp.Diff(tc.want, got.IDs); diff != "" {
			t.Errorf("%q:\n%s", tc.args, diff)
		}
	}
}

func TestGenModelTiny(t *testing.T) {
	out := t.TempDir() + "/tiny.gguf"
	// Q4_K_M, Q5_K_M and IQ4_XS: tiny's rows of 64 and 192 fall back to Q5_0, Q5_1, Q8_0 and IQ4_NL.
	for _, typ := range []string{"Q8_0", "Q4_K_M", "Q5_K_M", "IQ4_XS"} {
		if err := runGenModel(context.Background(), []string{"--out", out, "--preset", "tiny", "--type", typ}); err != nil {
			t.Fatal(typ, err)
		}
		var buf bytes.Buffer
		if err := generateCmd(context.Background(), []string{"--model", out, "--prompt", "hi", "--max-tokens", "4", "--format", "json"}, &buf, io.Discard); err != nil {
			t.Fatal(typ, err)
		}
		if !strings.Contains(buf.String(), `"finish_reason":"length"`) {
			t.Errorf("%s: generate did not run its 4 tokens: %s", typ, buf.String())
		}
	}
	if err := runGenModel(context.Background(), []string{"--out", out, "--preset", "tiny", "--type", "Q3_K"}); err == nil {
		t.Error("gen-model accepted --type Q3_K")
	}
}

// renamed is a backend under another name (a stand-in for the CUDA one).
type renamed struct {
	batch.Backend
	name string
}

func (r renamed) Name() string { return r.name }

// TestGenerateBackend: --backend picks the backend as serve does, and
// generate says which one ran and why, on stderr and in its JSON.
func TestGenerateBackend(t *testing.T) {
	saved := newCUDABackend
	t.Cleanup(func() { newCUDABackend = saved })
	noGPU := func(*runtime.Model, cudaOptions, *slog.Logger) (batch.Backend, error) {
		return nil, errors.New("no GPU found")
	}
	fakeGPU := func(m *runtime.Model, o cudaOptions, _ *slog.Logger) (batch.Backend, error) {
		if o.MaxSeqs != 1 {
			t.Errorf("cuda options %+v: want MaxSeqs 1", o)
		}
		b, err := m.NewCPUBackend(cpu.Config{BlockSize: 32, NumBlocks: 8, KVType: "f32"})
		return renamed{b, "fake-cuda"}, err
	}
	tests := []struct {
		name    string
		hook    func(*runtime.Model, cudaOptions, *slog.Logger) (batch.Backend, error)
		backend string
		want    string // the JSON's backend, after the CPU backend's name or as a whole
		wantErr string
	}{
		{name: "cpu", hook: fakeGPU, backend: "cpu", want: "; --backend cpu"},
		{name: "auto without a GPU", hook: noGPU, backend: "auto", want: "; --backend auto: CUDA unavailable: no GPU found"},
		{name: "auto with a GPU", hook: fakeGPU, backend: "auto", want: "fake-cuda; --backend auto"},
		{name: "cuda with a GPU", hook: fakeGPU, backend: "cuda", want: "fake-cuda; --backend cuda"},
		{name: "cuda without a GPU", hook: noGPU, backend: "cuda", wantErr: "--backend cuda: no GPU found"},
		{name: "bad choice", backend: "tpu", wantErr: "--backend must be auto, cpu or cuda"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			newCUDABackend = tc.hook
			var out, errb bytes.Buffer
			err := generateCmd(context.Background(), []string{"--prompt", "Hello", "--max-tokens", "4", "--format", "json", "--backend", tc.backend}, &out, &errb)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var res generateResult
			if err := json.Unmarshal(out.Bytes(), &res); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(res.Backend, tc.want) || (strings.HasPrefix(tc.want, ";") && !strings.HasPrefix(res.Backend, "cpu (")) {
				t.Errorf("backend %q, want %q after the CPU backend's name", res.Backend, tc.want)
			}
			if want := "backend: " + res.Backend + "\n"; errb.String() != want {
				t.Errorf("stderr %q, want %q", errb.String(), want)
			}
			if len(res.TokenIDs) != 4 {
				t.Errorf("%d tokens, want 4", len(res.TokenIDs))
			}
		})
	}
}

// TestGenerateHonoursContext: weft generate stops at the end of the context
// with finish reason length and refuses what the server refuses
// (max_tokens above the context, a prompt that fills it).
func TestGenerateHonoursContext(t *testing.T) {
	m, err := runtime.Load(shareddata.Path(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctxLen := m.HP.ContextLen
	// A prompt 5 tokens short of the context.
	words := strings.Fields(strings.Repeat("Once upon a time there was a little dog. ", ctxLen))
	fits := func(i int) bool { return len(m.Tok.Encode(strings.Join(words[:i], " "), true, true)) <= ctxLen-5 }
	lo, hi := 1, len(words) // fits(lo), !fits(hi)
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	prompt := strings.Join(words[:lo], " ")
	nPrompt := len(m.Tok.Encode(prompt, true, true))
	cfg := generateConfig{Prompt: prompt, MaxTokens: ctxLen, KVType: "f32", Format: "json", Chunk: 512, Backend: "cpu"}
	res, err := generate(context.Background(), m, cfg, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Tokens int
		Finish string
	}
	if diff := cmp.Diff(outcome{ctxLen - nPrompt, "length"}, outcome{len(res.TokenIDs), res.FinishReason}); diff != "" {
		t.Errorf("prompt of %d tokens, context %d (-want +got):\n%s", nPrompt, ctxLen, diff)
	}
	for _, bad := range []generateConfig{
		{Prompt: "Hi", MaxTokens: ctxLen + 1, KVType: "f32", Format: "json", Backend: "cpu"},
		{Prompt: strings.Join(words, " "), MaxTokens: 1, KVType: "f32", Format: "json", Backend: "cpu"},
	} {
		if _, err := generate(context.Background(), m, bad, io.Discard, io.Discard); err == nil {
			t.Errorf("max_tokens %d, prompt of %d bytes: accepted", bad.MaxTokens, len(bad.Prompt))
		}
	}
}
