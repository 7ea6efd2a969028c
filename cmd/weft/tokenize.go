package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
)

func init() {
	register(command{name: "tokenize", short: "print a text's token ids", run: runTokenize})
}

func runTokenize(ctx context.Context, args []string) error {
	return tokenizeCmd(args, os.Stdin, os.Stdout)
}

func tokenizeCmd(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	model := fs.String("model", "", "GGUF model file (default: the built-in model weft-tiny)")
	text := fs.String("text", "", "text to tokenize; - reads standard input")
	noBOS := fs.Bool("no-bos", false, "add no BOS/EOS and do not parse special tokens")
	format := fs.String("format", "text", "output: text (ids separated by spaces) or json ({\"ids\": [...]})")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *format != "text" && *format != "json" {
		return fmt.Errorf("--format must be text or json, got %q", *format)
	}
	in := *text
	if in == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		in = string(b)
	}
	m, err := loadModelOrBuiltin(*model)
	if err != nil {
		return err
	}
	defer m.Close()
	ids := m.Tok.Encode(in, !*noBOS, !*noBOS)
	if ids == nil {
		ids = []int32{}
	}
	if *format == "json" {
		return json.NewEncoder(stdout).Encode(struct {
			IDs []int32 `json:"ids"`
		}{ids})
	}
	for i, id := range ids {
		if i > 0 {
			fmt.Fprint(stdout, " ")
		}
		fmt.Fprint(stdout, id)
	}
	fmt.Fprintln(stdout)
	return nil
}
