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

// TestTokenizeVocabFiles runs tokenize and detokenize on every
// vocabulary-only GGUF in ../shared/vocab (SentencePiece, byte-level BPE with
// many pre-tokenizers, Gemma 4's BPE; architectures weft cannot run): the
// tokenizer alone loads; `weft tokenize --separator` given the whole .inp
// file prints, line for line, the ids of the .out file (every vector of
// llama.cpp's test-tokenizer-0 through the command); a few vectors also go
// one by one through tokenize and back through detokenize; and the loader
// the commands share decodes every vector's ids back to its text.
func TestTokenizeVocabFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(filepath.Dir(shareddata.Path(t, "vocab/README.md")), "*.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(shareddata.VocabNames) {
		t.Errorf("shared/vocab has %d vocabulary files, want the %d of shareddata.VocabNames: %q", len(files), len(shareddata.VocabNames), files)
	}
	for _, name := range shareddata.VocabNames {
		t.Run(name, func(t *testing.T) {
			file := shareddata.VocabFile(t, name)
			vs := shareddata.ReadVocabVectors(t, name)
			if len(vs) < 40 {
				t.Fatalf("only %d vectors", len(vs))
			}
			inp, err := os.ReadFile(file + ".inp")
			if err != nil {
				t.Fatal(err)
			}

			// Every vector through the command, in one run.
			var out bytes.Buffer
			if err := tokenizeCmd([]string{"--model", file, "--no-bos", "--separator", "__ggml_vocab_test__", "--text", "-"},
				bytes.NewReader(inp), &out); err != nil {
				t.Fatalf("tokenize: %v", err)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != len(vs) {
				t.Fatalf("tokenize printed %d lines for %d vectors", len(lines), len(vs))
			}
			for i, v := range vs {
				got := []int32{}
				for _, f := range strings.Fields(lines[i]) {
					n, err := strconv.ParseInt(f, 10, 32)
					if err != nil {
						t.Fatalf("tokenize line %d: %v", i+1, err)
					}
					got = append(got, int32(n))
				}
				if diff := cmp.Diff(v.IDs, got); diff != "" {
					t.Errorf("tokenize vector %d %q (-want +got):\n%s", i, v.Text, diff)
				}
			}

			tok, err := loadTokenizer(file)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vs {
				if back := tok.Decode(v.IDs); back != v.Text {
					t.Errorf("vector %d: Decode = %q, want %q", i, back, v.Text)
				}
			}

			// One by one through both commands: the longest vector and two short ones.
			longest := 0
			for i, v := range vs {
				if len(v.IDs) > len(vs[longest].IDs) {
					longest = i
				}
			}
			for _, i := range []int{1, 5, longest} {
				v := vs[i]
				var out bytes.Buffer
				if err := tokenizeCmd([]string{"--model", file, "--no-bos", "--format", "json", "--text", "-"},
					strings.NewReader(v.Text), &out); err != nil {
					t.Fatalf("tokenize: %v", err)
				}
				var ids struct{ IDs []int32 }
				if err := json.Unmarshal(out.Bytes(), &ids); err != nil {
					t.Fatalf("tokenize output %q: %v", out.String(), err)
				}
				if diff := cmp.Diff(v.IDs, ids.IDs); diff != "" {
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
				if got.Text != v.Text {
					t.Errorf("detokenize vector %d = %q, want %q", i, got.Text, v.Text)
				}
			}
		})
	}
}

func TestTokenizeSeparator(t *testing.T) {
	model := shareddata.Path(t, "models/stories260K.gguf")
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"Once\n--\nupon a\n--\n", nil, "403\n407 261\n"},
		// What follows the last separator is one more text.
		{"Once\n--\nupon a", nil, "403\n407 261\n"},
		// Empty texts print empty lines; a text never ends with the newline before a separator.
		{"\n--\nOnce\n\n--\n", nil, "\n403 13\n"},
		{"Once\n--\nupon a", []string{"--format", "json"}, "{\"ids\":[403]}\n{\"ids\":[407,261]}\n"},
		{"", nil, ""},
	} {
		var out bytes.Buffer
		args := append([]string{"--model", model, "--no-bos", "--separator", "--", "--text", "-"}, tc.args...)
		if err := tokenizeCmd(args, strings.NewReader(tc.stdin), &out); err != nil {
			t.Errorf("%q: %v", tc.stdin, err)
			continue
		}
		if diff := cmp.Diff(tc.want, out.String()); diff != "" {
			t.Errorf("%q %q (-want +got):\n%s", tc.stdin, tc.args, diff)
		}
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
