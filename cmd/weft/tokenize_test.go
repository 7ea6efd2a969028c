package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weft-inference/weft/internal/shareddata"
)

// vocabVector is one llama.cpp tokenizer test: a text and its ids (no BOS,
// special tokens not parsed).
type vocabVector struct {
	text string
	ids  []int32
}

// readVocabVectors reads FILE.inp (texts separated by the line
// "__ggml_vocab_test__") and FILE.out (one line of ids per text).
func readVocabVectors(t *testing.T, gguf string) []vocabVector {
	t.Helper()
	inp, err := os.ReadFile(gguf + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	outb, err := os.ReadFile(gguf + ".out")
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	texts := strings.Split(string(inp), sep)
	if last := texts[len(texts)-1]; last != "" {
		t.Fatalf("%s.inp: %q after the last separator", gguf, last)
	}
	texts = texts[:len(texts)-1]
	lines := strings.Split(strings.TrimSuffix(string(outb), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s: %d texts but %d id lines", gguf, len(texts), len(lines))
	}
	vs := make([]vocabVector, len(texts))
	for i, text := range texts {
		vs[i] = vocabVector{text: text, ids: []int32{}}
		for _, f := range strings.Fields(lines[i]) {
			n, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", gguf, i+1, err)
			}
			vs[i].ids = append(vs[i].ids, int32(n))
		}
	}
	return vs
}

// TestTokenizeVocabFiles runs tokenize and detokenize on every
// vocabulary-only GGUF in ../shared/vocab (SentencePiece and byte-level BPE,
// several pre-tokenizers, architectures weft cannot run): the tokenizer
// alone loads, every vector's ids match llama.cpp's, and detokenize gives
// the text back. The commands themselves run on a few vectors per file; the
// loader they share runs on all.
func TestTokenizeVocabFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(filepath.Dir(shareddata.Path(t, "vocab/README.md")), "*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 9 {
		t.Fatalf("found %d vocabulary files in shared/vocab, want the 9 of its README", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), "ggml-vocab-"), ".gguf"), func(t *testing.T) {
			vs := readVocabVectors(t, file)
			if len(vs) < 10 {
				t.Fatalf("only %d vectors", len(vs))
			}
			tok, err := loadTokenizer(file)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vs {
				got := tok.Encode(v.text, false, false)
				if got == nil {
					got = []int32{}
				}
				if diff := cmp.Diff(v.ids, got); diff != "" {
					t.Errorf("vector %d %q (-want +got):\n%s", i, v.text, diff)
				}
				if back := tok.Decode(v.ids); back != v.text {
					t.Errorf("vector %d: Decode = %q, want %q", i, back, v.text)
				}
			}
			// Through the commands: the longest vector and two short ones.
			longest := 0
			for i, v := range vs {
				if len(v.ids) > len(vs[longest].ids) {
					longest = i
				}
			}
			for _, i := range []int{1, 5, longest} {
				v := vs[i]
				var out bytes.Buffer
				if err := tokenizeCmd([]string{"--model", file, "--no-bos", "--format", "json", "--text", "-"},
					strings.NewReader(v.text), &out); err != nil {
					t.Fatalf("tokenize: %v", err)
				}
				var ids struct{ IDs []int32 }
				if err := json.Unmarshal(out.Bytes(), &ids); err != nil {
					t.Fatalf("tokenize output %q: %v", out.String(), err)
				}
				if diff := cmp.Diff(v.ids, ids.IDs); diff != "" {
					t.Errorf("tokenize vector %d (-want +got):\n%s", i, diff)
				}
				var text bytes.Buffer
				if err := detokenizeCmd([]string{"--model", file, "--format", "json", "--ids", "-"}, &out, &text); err != nil {
					t.Fatalf("detokenize: %v", err)
				}
				var got struct{ Text string }
				if err := json.Unmarshal(text.Bytes(), &got); err != nil {
					t.Fatalf("detokenize output %q: %v", text.String(), err)
				}
				if got.Text != v.text {
					t.Errorf("detokenize vector %d = %q, want %q", i, got.Text, v.text)
				}
			}
		})
	}
}

func TestDetokenize(t *testing.T) {
	model := shareddata.Path(t, "models/stories260K.gguf")
	tests := []struct {
		args    []string
		stdin   string
		want    string
		wantErr string
	}{
		{args: []string{"--ids", "1 403 407 261 378"}, want: "Once upon a time\n"},
		{args: []string{"--ids", "403,407,261,378"}, want: "Once upon a time\n"},
		{args: []string{"--ids", "[403, 407, 261, 378]", "--format", "json"}, want: "{\"text\":\"Once upon a time\"}\n"},
		{args: []string{"--ids", "-"}, stdin: `{"ids":[403,407,261,378]}`, want: "Once upon a time\n"},
		{args: []string{"--ids", ""}, want: "\n"},
		{args: []string{"--ids", "403 x"}, wantErr: `"x" is not a token id`},
		{args: []string{"--ids", "512"}, wantErr: "outside the vocabulary (0..511)"},
		{args: []string{"--ids", "-1"}, wantErr: "outside the vocabulary"},
		{args: []string{"--ids", "1", "--format", "xml"}, wantErr: "--format"},
	}
	for _, tc := range tests {
		var out bytes.Buffer
		err := detokenizeCmd(append([]string{"--model", model}, tc.args...), strings.NewReader(tc.stdin), &out)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err = %v, want one containing %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, out.String()); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.args, diff)
		}
	}
}
