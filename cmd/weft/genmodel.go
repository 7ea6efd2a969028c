package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/llama"
)

func init() {
	register(command{name: "gen-model", short: "write a random-weight GGUF model (for tests and benchmarks)", run: runGenModel})
}

func runGenModel(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("gen-model", flag.ContinueOnError)
	out := fs.String("out", "", "output GGUF path (required)")
	preset := fs.String("preset", "synth-110m", "model shape: "+strings.Join(llama.Presets, ", ")+
		" (llama-3.2-1b, qwen3-0.6b, qwen3-1.7b, gemma3-270m, gemma3-1b: those models' layer shapes; qwen3moe-1.5b, gptoss-1.5b: mixtures of experts"+
		" in Qwen3-30B-A3B's and gpt-oss-20b's proportions; all with a generated 32000-token vocabulary)")
	typ := fs.String("type", "F16", "2-D tensor type: F32, F16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4, "+
		"Q4_K_M or Q5_K_M (Q4_K or Q5_K with llama.cpp's Q6_K layers: output, and attention V / FFN down of some layers) "+
		"or MXFP4_MOE (MoE presets: experts MXFP4, the rest Q8_0, as gpt-oss is released); "+
		"in dense presets a matrix whose rows are not whole blocks of the type takes llama.cpp's fallback type "+
		"(Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL, else F16) and is logged")
	vocab := fs.String("vocab", "", "vocab-only GGUF whose tokenizer keys are copied (default for synth-110m: <shared>/vocab/ggml-vocab-llama-spm.gguf)")
	seed := fs.Uint64("seed", 0, "weight seed (0: the preset's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *out == "" {
		return fmt.Errorf("--out is required")
	}
	cfg, err := llama.Preset(*preset)
	if err != nil {
		return err
	}
	if strings.EqualFold(*typ, "Q4_K_M") {
		cfg.Type, cfg.MoreBitsQ6K = gguf.TypeQ4_K, true
	} else if strings.EqualFold(*typ, "Q5_K_M") {
		cfg.Type, cfg.MoreBitsQ6K = gguf.TypeQ5_K, true
	} else if strings.EqualFold(*typ, "MXFP4_MOE") {
		if cfg.MoE == nil {
			return fmt.Errorf("--type MXFP4_MOE needs a mixture-of-experts preset (qwen3moe-1.5b, gptoss-1.5b)")
		}
		cfg.Type, cfg.ExpertsMXFP4 = gguf.TypeQ8_0, true
	} else if cfg.Type, err = parseType(*typ); err != nil {
		return err
	}
	if *seed != 0 {
		cfg.Seed = *seed
	}
	vpath := *vocab
	if vpath == "" && (*preset == "synth-110m" || cfg.MoE != nil) {
		d := shareddata.Dir()
		if d == "" {
			return fmt.Errorf("%s needs the Llama-2 vocabulary: pass --vocab PATH (ggml-vocab-llama-spm.gguf) or set WEFT_SHARED", *preset)
		}
		vpath = filepath.Join(d, "vocab", "ggml-vocab-llama-spm.gguf")
	}
	if vpath != "" {
		kvs, err := tokenizerKVs(vpath)
		if err != nil {
			return err
		}
		cfg.Tokenizer = kvs
		cfg.VocabSize = 0
	}
	// fellBack counts, per "Q4_K -> Q5_0", the tensors written in the
	// fallback type, by name with the layer number as * and row length.
	fellBack := map[string]map[string]int{}
	layer := regexp.MustCompile(`^blk\.[0-9]+\.`)
	cfg.OnFallback = func(tensor string, want, got gguf.Type, cols int) {
		k := fmt.Sprintf("%s -> %s", want, got)
		if fellBack[k] == nil {
			fellBack[k] = map[string]int{}
		}
		fellBack[k][fmt.Sprintf("%s (rows of %d)", layer.ReplaceAllString(tensor, "blk.*."), cols)]++
	}
	if err := writeModel(cfg, *out); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(fellBack)) {
		var names []string
		total := 0
		for _, n := range slices.Sorted(maps.Keys(fellBack[k])) {
			names = append(names, fmt.Sprintf("%s x%d", n, fellBack[k][n]))
			total += fellBack[k][n]
		}
		slog.Info("rows not a multiple of the type's block: written in the fallback type, as llama.cpp's quantizer does",
			"types", k, "tensors", total, "names", strings.Join(names, ", "))
	}
	return nil
}

// writeModel generates cfg into path (through a temporary file renamed into
// place).
func writeModel(cfg llama.GenConfig, path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = llama.Generate(cfg, w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("gen-model: %w", err)
	}
	typ := cfg.Type.String()
	if cfg.MoreBitsQ6K {
		typ += " with Q6_K layers (" + typ + "_M mix)"
	}
	if cfg.ExpertsMXFP4 {
		typ += " with MXFP4 experts (MXFP4_MOE mix)"
	}
	slog.Info("wrote random-weight model (NOT a trained model)", "path", path, "name", cfg.Name, "type", typ)
	return nil
}

func parseType(s string) (gguf.Type, error) {
	for _, t := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
		gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeMXFP4} {
		if strings.EqualFold(s, t.String()) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("--type %q: want F32, F16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4, Q4_K_M, Q5_K_M or MXFP4_MOE", s)
}

// tokenizerKVs reads the tokenizer.* keys of a GGUF.
func tokenizerKVs(path string) ([]gguf.KV, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var kvs []gguf.KV
	for _, kv := range f.KVs {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			kvs = append(kvs, cloneKV(kv))
		}
	}
	if len(kvs) == 0 {
		return nil, fmt.Errorf("%s has no tokenizer keys", path)
	}
	return kvs, nil
}

// cloneKV copies values that might alias the file mapping.
func cloneKV(kv gguf.KV) gguf.KV {
	switch v := kv.Value.(type) {
	case []string:
		kv.Value = append([]string(nil), v...)
	case []float32:
		kv.Value = append([]float32(nil), v...)
	case []int32:
		kv.Value = append([]int32(nil), v...)
	case []uint8:
		kv.Value = append([]uint8(nil), v...)
	case string:
		kv.Value = strings.Clone(v)
	}
	return kv
}
