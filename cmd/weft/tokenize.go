package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/weft-inference/weft/runtime"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/tokenizer"
)

func init() {
	register(command{name: "tokenize", short: "print a text's token ids (any GGUF with a vocabulary)", run: runTokenize})
	register(command{name: "detokenize", short: "print the text of token ids (any GGUF with a vocabulary)", run: runDetokenize})
}

func runTokenize(ctx context.Context, args []string) error {
	return tokenizeCmd(args, os.Stdin, os.Stdout)
}

func runDetokenize(ctx context.Context, args []string) error {
	return detokenizeCmd(args, os.Stdin, os.Stdout)
}

// loadTokenizer reads only the vocabulary of the GGUF file at path (empty:
// the built-in model's): no weights are built and the architecture does not
// matter, so vocabulary-only files and models weft cannot run both work.
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	if path == "" {
		m, err := runtime.LoadDefault()
		if err != nil {
			return nil, err
		}
		defer m.Close()
		return m.Tok, nil
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: tokenizer: %w", path, err)
	}
	return tok, nil
}

// readArg is s, or all of stdin when s is "-".
func readArg(s string, stdin io.Reader) (string, error) {
	if s != "-" {
		return s, nil
	}
	b, err := io.ReadAll(stdin)
	if err != nil {
		return "", fmt.Errorf("read stdin: %w", err)
	}
	return string(b), nil
}

func tokenizeCmd(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	model := fs.String("model", "", "GGUF `file` with a vocabulary, weights or not (default: the built-in model weft-tiny)")
	text := fs.String("text", "", "text to tokenize; - reads standard input")
	noBOS := fs.Bool("no-bos", false, "add no BOS/EOS and do not parse special tokens")
	format := fs.String("format", "text", "output: text (ids separated by spaces) or json ({\"ids\": [...]})")
	sep := fs.String("separator", "", "tokenize several texts, separated by lines equal to `LINE`, and print one line of ids (or one JSON object) per text; llama.cpp's vocabulary tests (.inp files) use __ggml_vocab_test__")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *format != "text" && *format != "json" {
		return fmt.Errorf("--format must be text or json, got %q", *format)
	}
	in, err := readArg(*text, stdin)
	if err != nil {
		return err
	}
	tok, err := loadTokenizer(*model)
	if err != nil {
		return err
	}
	texts := []string{in}
	if *sep != "" {
		texts = splitTexts(in, *sep)
	}
	w := bufio.NewWriter(stdout)
	enc := json.NewEncoder(w)
	for _, text := range texts {
		ids := tok.Encode(text, !*noBOS, !*noBOS)
		if ids == nil {
			ids = []int32{}
		}
		if *format == "json" {
			if err := enc.Encode(struct {
				IDs []int32 `json:"ids"`
			}{ids}); err != nil {
				return err
			}
			continue
		}
		for i, id := range ids {
			if i > 0 {
				w.WriteByte(' ')
			}
			w.WriteString(strconv.Itoa(int(id)))
		}
		w.WriteByte('\n')
	}
	return w.Flush()
}

// splitTexts cuts s at every line equal to sep, as llama.cpp's
// tests/test-tokenizer-0 reads its .inp files: the texts are what lies
// between occurrences of "\n"+sep+"\n" (a text never ends with the newline
// before a separator line), and what follows the last one is one more text
// unless it is empty.
func splitTexts(s, sep string) []string {
	full := "\n" + sep + "\n"
	var texts []string
	for s != "" {
		k := strings.Index(s, full)
		if k < 0 {
			texts = append(texts, s)
			break
		}
		texts = append(texts, s[:k])
		s = s[k+len(full):]
	}
	return texts
}

func detokenizeCmd(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("detokenize", flag.ContinueOnError)
	model := fs.String("model", "", "GGUF `file` with a vocabulary, weights or not (default: the built-in model weft-tiny)")
	idsArg := fs.String("ids", "", "token ids separated by spaces or commas, or tokenize's JSON ({\"ids\": [...]}); - reads standard input")
	format := fs.String("format", "text", "output: text or json ({\"text\": \"...\"})")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *format != "text" && *format != "json" {
		return fmt.Errorf("--format must be text or json, got %q", *format)
	}
	in, err := readArg(*idsArg, stdin)
	if err != nil {
		return err
	}
	ids, err := parseIDs(in)
	if err != nil {
		return err
	}
	tok, err := loadTokenizer(*model)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if id < 0 || int(id) >= tok.VocabSize() {
			return fmt.Errorf("token id %d is outside the vocabulary (0..%d)", id, tok.VocabSize()-1)
		}
	}
	text := tok.Decode(ids)
	if *format == "json" {
		return json.NewEncoder(stdout).Encode(struct {
			Text string `json:"text"`
		}{text})
	}
	_, err = fmt.Fprintln(stdout, text)
	return err
}

// parseIDs reads ids separated by spaces or commas (brackets allowed), or
// a JSON object {"ids": [...]}.
func parseIDs(s string) ([]int32, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") {
		var v struct {
			IDs []int32 `json:"ids"`
		}
		if err := json.Unmarshal([]byte(t), &v); err != nil {
			return nil, fmt.Errorf("ids: %w", err)
		}
		return v.IDs, nil
	}
	fields := strings.FieldsFunc(t, func(r rune) bool {
		return r == ',' || r == '[' || r == ']' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	ids := make([]int32, 0, len(fields))
	for _, f := range fields {
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("ids: %q is not a token id", f)
		}
		ids = append(ids, int32(n))
	}
	return ids, nil
}
